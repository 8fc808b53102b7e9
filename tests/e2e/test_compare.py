"""``rimo-eval compare``: pairing, flips, tests, renderings, and the real git/DVC revisions.

The statistics themselves (bootstrap, exact McNemar) are tested in tests/unit/test_statistics.py.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from rimo_eval.commands.compare.command import (
    Revision,
    Side,
    bootstrap_settings,
    compare,
    compare_sides,
    render_html,
    render_markdown,
)
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.params.config import ScoreParams, load_params
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.run.reader import RunReader
from tests.support.factories import n_item, p_item, section
from tests.support.pipeline_repo import sh
from tests.support.replay_files import replay_rows, write_jsonl
from tests.support.scored_runs import scored_side
from tests.support.validated_repo import validated_copy

# --- flips and the table on small real score tables --------------------------------------------


N_ITEMS = [n_item("2001a1", "12"), n_item("2001a2", "-3"), n_item("2001c1", "7", "combinatorics"),
           n_item("2001c2", "100", "combinatorics"), n_item("2001g1", "5", "geometry")]
P_ITEMS = [p_item("2001a1", ["s1"]), p_item("2001g1", ["g1", "g2"]),
           p_item("2001n1", ["n1", "n2", "n3"]), p_item("2005p3", [""], gradable=False)]


@pytest.fixture(scope="module")
def small_sides(tmp_path_factory: pytest.TempPathFactory) -> tuple[Side, Side]:
    root = tmp_path_factory.mktemp("cmp")
    a = scored_side(root, "a", N_ITEMS, P_ITEMS, [
        (TRACK_N, "2001a1", "12"), (TRACK_N, "2001a2", "-3"), (TRACK_N, "2001c1", "0"),
        (TRACK_N, "2001c2", "100"),  # 2001g1 missing: wrong
        (TRACK_P, "2001a1", ["s1"]), (TRACK_P, "2001g1", ["g1", "x"]),
        (TRACK_P, "2001n1", ["n1", "n2", "n3"])])
    # B: RIMO-N loses 2001a1 and 2001c2, gains 2001c1; RIMO-P gains 2001g1, loses 2001n1
    # (still 2/3 parts right). 2001a2 changes content in B, so it is not paired.
    n_b = [*N_ITEMS[:1], n_item("2001a2", "-4"), *N_ITEMS[2:]]
    b = scored_side(root, "b", n_b, P_ITEMS, [
        (TRACK_N, "2001a1", "13"), (TRACK_N, "2001a2", "-4"), (TRACK_N, "2001c1", "7"),
        (TRACK_N, "2001c2", "1000"),
        (TRACK_P, "2001a1", ["s1"]), (TRACK_P, "2001g1", ["g1", "g2"]),
        (TRACK_P, "2001n1", ["n1", "n2", "x"]), (TRACK_P, "2005p3", ["?"])])
    return a, b


def test_flips_pairs_and_tests_on_small_tables(small_sides: tuple[Side, Side]) -> None:
    result = compare_sides(*small_sides, samples=200, seed=1)
    n, p = result["tracks"][TRACK_N], result["tracks"][TRACK_P]
    assert n["changed_items"] == ["2001a2"] and n["paired"] == 4
    assert [(f["problem_id"], f["domain"], f["a"], f["b"]) for f in n["flips"]] == [
        ("2001a1", "algebra", True, False), ("2001c1", "combinatorics", False, True),
        ("2001c2", "combinatorics", True, False)]
    assert (n["test"]["right_in_a_only"], n["test"]["right_in_b_only"]) == (2, 1)
    assert n["test"]["p_value"] == 1.0  # 2 * (1 + 3) / 8 capped
    assert p["paired"] == 3  # the ungradable item is not part of strict
    assert [(f["problem_id"], f["a"], f["b"], f["parts"]) for f in p["flips"]] == [
        ("2001g1", False, True, 2), ("2001n1", True, False, 3)]
    assert p["test"]["p_value"] == 1.0
    rows = {r["name"]: r for r in result["metrics"]}
    # 2001a2 changed content, so the item sets differ: every value is over the 4 shared RIMO-N
    # items (A right on 2, B on 1), not metrics.json's 5 (0.6 and 0.4).
    assert result["items"][TRACK_N] == {"shared": 4, "only_a": 0, "only_b": 0,
                                        "changed_items": 1}
    acc = rows["RIMO-N.accuracy"]
    assert (acc["a"], acc["b"], acc["delta"]) == (2 / 4, 1 / 4, 1 / 4 - 2 / 4)
    assert rows["RIMO-P.sub_problem_accuracy"]["delta"] == pytest.approx((5 - 5) / 6)
    assert rows["RIMO-P.prefix_score"]["delta"] == pytest.approx(
        ((1 + 1 + 2 / 3) - (1 + 0.5 + 1)) / 3, abs=1e-6)
    assert rows["RIMO-N.correct"]["delta"] == 1 - 2 and rows["RIMO-N.correct"]["ci"] is None
    assert rows["RIMO-N.n"]["a"] == rows["RIMO-N.n"]["b"] == 4
    for name in ("RIMO-N.accuracy", "RIMO-N.by_domain.combinatorics", "RIMO-P.strict",
                 "RIMO-P.by_parts.3.strict"):
        ci = rows[name]["ci"]
        assert ci is not None and ci["low"] <= rows[name]["delta"] <= ci["high"]
    assert [r["name"] for r in result["metrics"]][:2] == ["RIMO-N.accuracy",
                                                          "RIMO-N.by_domain.algebra"]
    assert not any(".ci." in r["name"] or r["name"].startswith("provenance")
                   for r in result["metrics"])


def test_renderings_escape_ids_and_labels(small_sides: tuple[Side, Side]) -> None:
    a, b = small_sides
    evil = "<script>alert(1)</script>|x"
    n = a.scores[TRACK_N]
    a = Side(Revision(evil, "experiment", "1" * 40), a.metrics,
             {**a.scores, TRACK_N: n.assign(domain=n["domain"].where(n["problem_id"] != "2001a1",
                                                                    evil))})
    result = compare_sides(a, b, samples=50)
    page = render_html(result)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;|x" in page
    assert page.startswith("<!DOCTYPE html>") and "http" not in page  # nothing external
    md = render_markdown(result)
    assert "<script>" not in md and "&lt;script>alert(1)&lt;/script>\\|x" in md
    assert "| 2001c1 | combinatorics | wrong | right |" in md
    assert "exact McNemar on correct" in md


def test_bootstrap_settings_come_from_params_and_options_override() -> None:
    params = section(ScoreParams, "score", bootstrap={"samples": 40, "seed": 3, "confidence": 0.8})
    none = argparse.Namespace(samples=None, seed=None, confidence=None)
    assert bootstrap_settings(params, none) == {"samples": 40, "seed": 3, "confidence": 0.8}
    assert bootstrap_settings(None, none) == {"samples": 1000, "seed": 0, "confidence": 0.95}
    some = argparse.Namespace(samples=None, seed=9, confidence=0.5)
    assert bootstrap_settings(params, some) == {"samples": 40, "seed": 9, "confidence": 0.5}


def test_bad_bootstrap_settings_are_a_config_error(small_sides: tuple[Side, Side]) -> None:
    with pytest.raises(ConfigError, match=re.escape("confidence in (0, 1), got samples=10, "
                                                         "confidence=1.5")):
        compare_sides(*small_sides, samples=10, confidence=1.5)


def test_duplicate_ids_in_a_scores_table_are_a_data_error(small_sides: tuple[Side, Side]
                                                          ) -> None:
    a, b = small_sides
    n = a.scores[TRACK_N]
    doubled = Side(a.revision, a.metrics, {**a.scores, TRACK_N: pd.concat([n, n.iloc[:1]])})
    with pytest.raises(DataError, match="scores of A: duplicate problem_id \\['2001a1'\\]"):
        compare_sides(doubled, b, samples=10)


# --- end to end: branches and an experiment in a real repo -------------------------------------

def commit_all(repo: Path, message: str) -> None:
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", message)


@pytest.fixture(scope="module")
def branches(tmp_path_factory: pytest.TempPathFactory, validated_base: Path
             ) -> tuple[Path, dict[str, Any]]:
    """Branches a and b and experiment exp-c (on b), whose replays differ in known items."""
    repo = validated_copy(validated_base, tmp_path_factory.mktemp("compare") / "repo",
                          predict={"backend": "replay", "limit": None,
                                   "replay": {"path": "replay.jsonl"}})
    items_n = pd.read_parquet(repo / "data/items/rimo_n.parquet")
    items_p = pd.read_parquet(repo / "data/items/rimo_p.parquet")
    gold_n = dict(zip(items_n["problem_id"], items_n["answer"], strict=True))
    domain_n = dict(zip(items_n["problem_id"], items_n["domain"], strict=True))
    graded = items_p[items_p["gradable"]]
    gold_p = {r.problem_id: list(r.sub_solutions) for r in graded.itertuples()}
    ids_n, ids_p = sorted(gold_n), sorted(gold_p)
    known = {"ids_n": ids_n, "ids_p": ids_p, "domain_n": domain_n}

    sh(repo, "git", "checkout", "-qb", "a")
    write_jsonl(repo / "replay.jsonl", replay_rows(
        gold_n, gold_p, wrong_n=set(ids_n[1:4]), missing_n={ids_n[0]}, wrong_p=set(ids_p[0:6])))
    # Up to score: compare reads the scores and metrics; judge, view and report add nothing.
    sh(repo, "dvc", "repro", "score")
    commit_all(repo, "a: replay A")

    sh(repo, "git", "checkout", "-qb", "b")
    wrong_b = set(ids_n[2:15])
    write_jsonl(repo / "replay.jsonl", replay_rows(
        gold_n, gold_p, wrong_n=wrong_b, missing_n=set(), wrong_p=set(ids_p[5:8])))
    # exp-c: B with ids_n[10:15] fixed and ids_n[100] broken.
    write_jsonl(repo / "replay_c.jsonl", replay_rows(
        gold_n, gold_p, wrong_n=(wrong_b - set(ids_n[10:15])) | {ids_n[100]}, missing_n=set(),
        wrong_p=set(ids_p[5:8])))
    sh(repo, "dvc", "repro", "score")
    commit_all(repo, "b: replay B")
    sh(repo, "dvc", "exp", "run", "-n", "exp-c", "score",
       "-S", "predict.replay.path=replay_c.jsonl")
    return repo, known


def cli(repo: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``rimo-eval ARGV`` in ``repo``, in-process (rimo_eval.cli.main: the same parsing, params
    file and exit status as the command, without a Python start per call): (status, stdout,
    stderr)."""
    from rimo_eval.cli import main

    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(repo)
        status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def boot(repo: Path) -> dict[str, Any]:
    """score.bootstrap of the repo's params.yaml, as the command takes it."""
    return bootstrap_settings(load_params(repo / "params.yaml").score, argparse.Namespace())


@pytest.fixture(scope="module")
def a_vs_b(branches: tuple[Path, dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """compare a b in-process, counting the DVC file systems it opens (RunFiles): (the result,
    the labels of the revisions each RunFiles was opened for)."""
    from rimo_eval.run import files

    repo, _ = branches
    opened: list[str] = []
    init = files.RunFiles.__init__

    def counting(self: files.RunFiles, revision: Revision, fs: Any) -> None:
        opened.append(revision.label)
        init(self, revision, fs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(files.RunFiles, "__init__", counting)
        result = json.loads(json.dumps(compare(repo, "a", "b", **boot(repo))))
    return result, opened


def flip_ids(result: dict[str, Any], track: str, a: bool) -> list[str]:
    return [f["problem_id"] for f in result["tracks"][track]["flips"] if f["a"] is a]


@pytest.mark.slow
def test_branches_report_exactly_the_known_flips(
        branches: tuple[Path, dict[str, Any]], a_vs_b: tuple[dict[str, Any], list[str]]) -> None:
    _, known = branches
    ids_n, ids_p = known["ids_n"], known["ids_p"]
    result = a_vs_b[0]  # the CLI's rendering of a b: test_markdown_and_html_outputs
    assert result["a"]["kind"] == result["b"]["kind"] == "git"
    # RIMO-N: A wrong on ids 0-3, B wrong on 2-14.
    assert flip_ids(result, TRACK_N, a=True) == ids_n[4:15]
    assert flip_ids(result, TRACK_N, a=False) == ids_n[0:2]
    assert all(f["domain"] == known["domain_n"][f["problem_id"]]
               for f in result["tracks"][TRACK_N]["flips"])
    n_test = result["tracks"][TRACK_N]["test"]
    assert (n_test["right_in_a_only"], n_test["right_in_b_only"]) == (11, 2)
    # By hand: 2 * P(X <= 2), X ~ Bin(13, 1/2) = 2 * (1 + 13 + 78) / 8192.
    assert n_test["p_value"] == pytest.approx(184 / 8192, rel=1e-12)
    # RIMO-P strict: A wrong on 0-5, B wrong on 5-7 -> 2 lost, 5 gained; 2 * (1+7+21) / 128.
    assert flip_ids(result, TRACK_P, a=True) == ids_p[6:8]
    assert flip_ids(result, TRACK_P, a=False) == ids_p[0:5]
    assert result["tracks"][TRACK_P]["test"]["p_value"] == pytest.approx(58 / 128, rel=1e-12)
    rows = {r["name"]: r for r in result["metrics"]}
    acc = rows["RIMO-N.accuracy"]
    assert acc["delta"] == pytest.approx((322 - 331) / 335, abs=2e-6)
    assert acc["ci"]["low"] <= acc["delta"] <= acc["ci"]["high"] < 0


@pytest.mark.slow
def test_markdown_and_html_outputs(branches: tuple[Path, dict[str, Any]], tmp_path: Path
                                   ) -> None:
    repo, known = branches
    page = tmp_path / "cmp.html"
    md = sh(repo, "rimo-eval", "compare", "a", "b", "--html", str(page)).stdout
    assert md.startswith("## RIMO comparison: A = a, B = b")
    assert "| RIMO-N | exact McNemar on correct | 335 | 11 | 2 | 0.02246 |" in md
    assert f"| {known['ids_n'][0]} | {known['domain_n'][known['ids_n'][0]]} | wrong | right |" in md
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "RIMO-P: 7 flipped on strict" in text


@pytest.mark.slow
def test_experiment_name_resolves_and_compares(branches: tuple[Path, dict[str, Any]]) -> None:
    repo, known = branches
    ids_n = known["ids_n"]
    shown = json.loads(sh(repo, "dvc", "exp", "show", "--json").stdout)
    assert "exp-c" in json.dumps(shown)
    result = json.loads(json.dumps(compare(repo, "b", "exp-c", **boot(repo))))
    assert result["b"]["kind"] == "experiment" and result["b"]["ref"].startswith("refs/exps/")
    assert result["b"]["predictions"][TRACK_N]["backend"] == "replay"
    assert flip_ids(result, TRACK_N, a=False) == ids_n[10:15]
    assert flip_ids(result, TRACK_N, a=True) == [ids_n[100]]
    assert result["tracks"][TRACK_N]["test"]["p_value"] == pytest.approx(2 * (1 + 6) / 64)
    assert result["tracks"][TRACK_P]["flips"] == []
    assert result["tracks"][TRACK_P]["test"]["p_value"] == 1.0
    # Reading through DVC left the work tree alone: still branch b's checkout + exp results.
    assert sh(repo, "git", "rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "b"
    a_vs_c = compare(repo, "a", "exp-c", **boot(repo))
    assert flip_ids(a_vs_c, TRACK_N, a=False) == ids_n[0:2]
    assert flip_ids(a_vs_c, TRACK_N, a=True) == [*ids_n[4:10], ids_n[100]]


@pytest.mark.slow
def test_each_revision_is_read_through_one_dvc_file_system(
        a_vs_b: tuple[dict[str, Any], list[str]]) -> None:
    """compare reads a side's scores, metrics, params and tables through one RunFiles (the run
    reader's, over the revision's git tree and dvc.lock: no DVC index built per run)."""
    result, opened = a_vs_b
    assert sorted(opened) == ["a", "b"]
    assert result["tracks"][TRACK_N]["flips"] and result["a"]["label"] == "a"


@pytest.mark.slow
def test_unknown_revision_is_a_clear_error(branches: tuple[Path, dict[str, Any]]) -> None:
    repo, _ = branches
    proc = sh(repo, "rimo-eval", "compare", "a", "no-such-exp", check=False)
    assert proc.returncode == 1
    assert "no-such-exp: not a git revision, branch or DVC experiment" in proc.stderr
    with pytest.raises(ConfigError), RunReader(repo) as reader:
        reader.resolve("no-such-exp")


@pytest.mark.slow
def test_intervals_follow_score_bootstrap_and_need_no_params_file(
        branches: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    repo, _ = branches
    params_path = repo / "params.yaml"
    saved = params_path.read_text()
    try:
        params = yaml.safe_load(saved)
        params["score"]["bootstrap"] = {"samples": 200, "seed": 5, "confidence": 0.9}
        params_path.write_text(yaml.safe_dump(params, sort_keys=False))
        from_params = json.loads(cli(repo, capsys, "compare", "a", "b", "--json")[1])
        assert from_params["bootstrap"] == {"samples": 200, "seed": 5, "confidence": 0.9}
        overridden = json.loads(cli(repo, capsys, "compare", "a", "b", "--seed", "6",
                                    "--json")[1])
        assert overridden["bootstrap"] == {"samples": 200, "seed": 6, "confidence": 0.9}
        ci = {r["name"]: r["ci"] for r in from_params["metrics"] if r["rate"]}
        ci6 = {r["name"]: r["ci"] for r in overridden["metrics"] if r["rate"]}
        assert ci != ci6  # the seed reached the resampling
        params_path.unlink()
        bare = cli(repo, capsys, "compare", "a", "b", "--json")[1]
        assert json.loads(bare)["bootstrap"] == {"samples": 1000, "seed": 0,
                                                 "confidence": 0.95}
        # Other commands still need one.
        status, _, err = cli(repo, capsys, "audit")
        assert status == 1 and "params file not found" in err
    finally:
        params_path.write_text(saved)
