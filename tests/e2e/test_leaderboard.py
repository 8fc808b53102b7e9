"""``rimo-eval leaderboard`` end to end: real replay experiments over the real 791 items.

One temporary DVC repo (tests/support/leaderboard_runs.py) holds five comparable k = 1 runs,
two k = 4 runs and a 5-item sample, all made by ``dvc exp run``. Each command's output, its
refusal and ``--all`` go through the real CLI; where a test is about the numbers (re-sorting, the
k = 4 tests against compare's, ``--label``), it calls the command's functions in-process: the
same code without a Python start, imports and figures per call (CI time, issue 31).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from rimo_eval.artifacts.flat_keys import flatten
from rimo_eval.commands.compare.command import bootstrap_settings, compare
from rimo_eval.commands.leaderboard.board import build as build_board
from rimo_eval.commands.leaderboard.command import leaderboard
from rimo_eval.commands.leaderboard.comparable import check
from rimo_eval.commands.leaderboard.loading import load_runs
from rimo_eval.commands.leaderboard.ranking import find_metric
from rimo_eval.commands.leaderboard.tables import render_markdown
from rimo_eval.errors import DataError
from rimo_eval.params.config import load_params
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.run.reader import RunReader
from rimo_eval.validate.errata import ERRATA_SCHEMA
from tests.support.leaderboard_runs import K4, K4B, MODELS, SAMPLE, build
from tests.support.pipeline_repo import copy_repo, sh
from tests.support.replay_files import repo_gold

pytestmark = pytest.mark.slow
FIVE = ["workspace", *[m for m in MODELS if m != "base"]]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, validated_base: Path) -> Path:
    return build(tmp_path_factory.mktemp("leaderboard") / "repo", validated_base)


CUTOFF = "m-weak=2019-06"


def board(repo: Path, *args: str) -> dict[str, Any]:
    return json.loads(sh(repo, "rimo-eval", "leaderboard", *args, "--json").stdout)


def boot(repo: Path) -> dict[str, Any]:
    """score.bootstrap of the repo's params.yaml, as the CLI of both commands takes it."""
    return bootstrap_settings(load_params(repo / "params.yaml").score, argparse.Namespace())


@pytest.fixture(scope="module")
def five(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The five comparable runs through the CLI, with m-weak's training cutoff: (the printed
    JSON, the --out folder). The point values, the year lens and the byte-identity tests read
    this one run."""
    out = tmp_path_factory.mktemp("five") / "lb"
    return board(repo, *FIVE, "--cutoff", CUTOFF, "--out", str(out)), out


def stored_metrics(repo: Path, name: str) -> dict[str, Any]:
    """The run's metrics.json as git stores it (the workspace: the file itself)."""
    if name == "workspace":
        return json.loads((repo / "reports/metrics.json").read_text())
    refs = sh(repo, "git", "for-each-ref", "--format=%(refname)", "refs/exps").stdout.split()
    (ref,) = [r for r in refs if r.endswith(f"/{name}")]
    return json.loads(sh(repo, "git", "show", f"{ref}:reports/metrics.json").stdout)


def expected_keys(stored: dict[str, Any]) -> dict[str, Any]:
    """Every number of a metrics.json, dotted; RIMO-N's legacy ci_low / ci_high under the
    contract's names."""
    expected = {}
    for track in TRACKS:
        for key, value in flatten(stored[track]).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                if track == TRACK_N:
                    key = {"ci_low": "accuracy_ci_low", "ci_high": "accuracy_ci_high"}.get(
                        key, key)
                expected[f"{track}.{key}"] = value
    return expected


def test_every_point_value_is_the_runs_own_metrics_json(
        repo: Path, five: tuple[dict[str, Any], Path]) -> None:
    result, out = five
    rows = {r["label"]: r for r in result["runs"]}
    assert sorted(rows) == sorted(FIVE)
    for name in FIVE:
        got = {k: v for k, v in rows[name].items() if k.startswith(TRACKS)}
        assert got == expected_keys(stored_metrics(repo, name)), name
        assert {"RIMO-N.accuracy_ci_low", "RIMO-P.prefix_score_ci_high",
                "RIMO-P.strict_ci_low"} <= set(got)
    # Ranked by RIMO-N accuracy, highest first; the ranks are those of the stored values.
    acc = [r[f"{TRACK_N}.accuracy"] for r in result["runs"]]
    assert acc == sorted(acc, reverse=True) and result["runs"][0]["label"] == "m-strong"
    assert [r["rank"]["rank"] for r in result["runs"]] == [1, 2, 3, 4, 5]
    for r in result["runs"]:
        assert r["rank"]["low"] <= r["rank"]["rank"] <= r["rank"]["high"]
    # m-mid (0.45) and m-mid2 (0.47) are close: their ranges overlap; m-strong is clear.
    assert rows["m-strong"]["rank"] == {"metric": "RIMO-N.accuracy", "rank": 1, "low": 1,
                                        "high": 1}
    assert rows["m-mid"]["rank"]["low"] == 2 and rows["m-mid2"]["rank"]["high"] == 3
    assert rows["m-strong"]["vs_leader"] is None
    assert all(r["vs_leader"]["below_leader"] for r in result["runs"][1:])
    assert all(r["k"] == 1 and r["backend"] == "replay" for r in result["runs"])
    # The settings the in-process tests below pass are the ones the CLI ranked with.
    assert result["bootstrap"] == boot(repo)
    assert rows["m-mid"]["model"] == "replay runs/m-mid.jsonl"  # as reports/model.json
    # The Markdown and the tex show the same stored values, in percent.
    md = (out / "leaderboard.md").read_text()
    tex = (out / "leaderboard.tex").read_text()
    for r in result["runs"]:
        v, lo, hi = (r[f"{TRACK_P}.prefix_score{s}"] for s in ("", "_ci_low", "_ci_high"))
        cell = f"{100 * v:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
        assert cell in md and cell in tex
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    page = (out / "leaderboard.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert "http://" not in page and "https://" not in page


def test_same_runs_give_byte_identical_files(repo: Path, tmp_path: Path,
                                             five: tuple[dict[str, Any], Path]) -> None:
    first, second = five[1], tmp_path / "two"
    sh(repo, "rimo-eval", "leaderboard", *reversed(FIVE), "--cutoff", CUTOFF, "--out",
       str(second))
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    assert {"forest_rimo_n.png", "forest_rimo_n.svg", "forest_rimo_p.svg", "solved_grid.png",
            "domain_heatmap.svg", "year_heatmap.png", "leaderboard.html",
            "leaderboard.tex"} <= set(names)
    assert "accuracy_cost.png" not in names  # replays have no cost
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    svg = (first / "forest_rimo_n.svg").read_text()
    assert "<dc:date>" not in svg


@functools.cache
def compare_json(repo: Path, a: str, b: str) -> dict[str, Any]:
    """compare's result for a and b (what ``--json`` prints), once per pair: it gives both
    tracks' tests."""
    return json.loads(json.dumps(compare(repo, a, b, **boot(repo))))


def compare_p(repo: Path, a: str, b: str, track: str) -> float:
    return compare_json(repo, a, b)["tracks"][track]["test"]["p_value"]


def boards(repo: Path, a: str, b: str, metrics: list[str]) -> list[dict[str, Any]]:
    """The leaderboard of a and b ranked by each metric in turn, in-process: the runs are read
    once (leaderboard() minus the figures, which these tests do not read)."""
    with RunReader(repo) as reader:
        runs = load_runs(reader, [a, b])
    check(runs)
    return [json.loads(json.dumps(build_board(runs, find_metric(m, runs[0].k), boot(repo))))
            for m in metrics]


def test_two_runs_give_compares_p_values(repo: Path) -> None:
    # k = 1: exact McNemar on RIMO-N correct and on RIMO-P strict.
    pairs = ((f"{TRACK_N}.accuracy", TRACK_N), (f"{TRACK_P}.strict", TRACK_P))
    for result, (_, track) in zip(boards(repo, "m-mid", "m-mid2", [m for m, _ in pairs]),
                                  pairs, strict=True):
        test = result["runs"][1]["vs_leader"]
        assert test["test"] == "exact McNemar"
        assert test["p_value"] == test["p_holm"] == compare_p(repo, "m-mid", "m-mid2", track)
    # k = 4: the paired bootstrap on per-item means, the same draw as compare's.
    pairs = ((f"{TRACK_N}.mean_at_k.accuracy", TRACK_N), (f"{TRACK_P}.mean_at_k.strict", TRACK_P))
    for result, (_, track) in zip(boards(repo, K4, K4B, [m for m, _ in pairs]), pairs,
                                  strict=True):
        test = result["runs"][1]["vs_leader"]
        assert test["test"] == "paired bootstrap on the per-item mean over samples"
        assert test["p_value"] == compare_p(repo, K4, K4B, track)
    assert result["k"] == 4 and result["ranked_by"] == f"{TRACK_P}.mean_at_k.strict"
    for r in result["runs"]:  # the k-sample keys are the runs' own too
        got = {k: v for k, v in r.items() if k.startswith(TRACKS)}
        assert got == expected_keys(stored_metrics(repo, r["label"])), r["label"]
    row = result["runs"][0]
    assert {f"{TRACK_N}.pass_at_k", f"{TRACK_N}.maj_at_k", f"{TRACK_N}.mean_at_k.accuracy_ci_low",
            f"{TRACK_N}.pass_at.2"} <= set(row)
    md = render_markdown(result)
    assert "mean@k" in md and "maj@k" in md and "pass@k" in md


def refused(repo: Path, *runs: str) -> str:
    proc = sh(repo, "rimo-eval", "leaderboard", *runs, "--out", "lb-refused", check=False)
    assert proc.returncode == 1 and not (repo / "lb-refused").exists()
    return proc.stderr


def test_k1_against_k4_is_refused_with_the_reason(repo: Path) -> None:
    err = refused(repo, "m-mid", K4)
    assert ("m-mid and m-k4 are not comparable: different k (samples per item): m-mid has "
            "k = 1, m-k4 k = 4") in err


def test_a_sample_against_the_full_run_is_refused(repo: Path) -> None:
    # The CLI's refusal (exit 1, nothing written): test_k1_against_k4_is_refused_with_the_reason.
    with pytest.raises(DataError) as caught:
        leaderboard(repo, ["workspace", SAMPLE])
    err = str(caught.value)
    assert "workspace and m-sample are not comparable: different items" in err
    assert "workspace evaluates 335/456 RIMO-N/RIMO-P items (all items)" in err
    assert "m-sample evaluates 5/5 RIMO-N/RIMO-P items (a sample)" in err


def test_all_ranks_the_largest_comparable_group_and_lists_the_others(repo: Path,
                                                                     tmp_path: Path) -> None:
    """--all beside a sample and k = 4 runs (issue 29 §3: it used to refuse outright): the five
    full k = 1 runs are ranked, the three others are listed with the reason."""
    with RunReader(repo) as reader:
        names = [r.label for r in reader.experiments()]
    assert names == sorted([*FIVE[1:], K4, K4B, SAMPLE])
    out = tmp_path / "lb"
    proc = sh(repo, "rimo-eval", "leaderboard", "--all", "--json", "--out", str(out))
    result = json.loads(proc.stdout)
    assert sorted(r["label"] for r in result["runs"]) == sorted(FIVE)
    assert result["runs"][0]["label"] == "m-strong" and result["k"] == 1
    left = {x["label"]: x["reason"] for x in result["left_out"]}
    assert sorted(left) == sorted([K4, K4B, SAMPLE])
    assert left[K4] == ("not comparable with workspace: different k (samples per item): "
                        "workspace has k = 1, m-k4 k = 4. Rank runs with the same "
                        "predict.samples.")
    assert left[SAMPLE].startswith(
        "not comparable with workspace: different items: workspace evaluates 335/456 "
        "RIMO-N/RIMO-P items (all items), m-sample evaluates 5/5 RIMO-N/RIMO-P items (a "
        "sample)")
    for label, reason in left.items():  # on stderr, in the Markdown and on the page
        assert f"leaderboard: left out {label}: {reason}" in proc.stderr
        assert f"- Left out by --all: {label}: {reason}" in (out / "leaderboard.md").read_text()
    assert "5 runs ranked by RIMO-N.accuracy, 3 left out" in proc.stderr
    page = (out / "leaderboard.html").read_text()
    assert "Left out by --all: m-sample: not comparable with workspace" in page
    # Named runs still refuse a mix: test_a_sample_against_the_full_run_is_refused.


def test_label_model_names_rows_by_model(repo: Path) -> None:
    result, _ = leaderboard(repo, ["m-weak", "m-strong"], label="model", **boot(repo))
    # The model as reports/model.json and every other tool name it: backend and model.
    assert [r["label"] for r in result["runs"]] == ["replay runs/m-strong.jsonl",
                                                    "replay runs/m-weak.jsonl"]
    assert [r["model"] for r in result["runs"]] == [r["label"] for r in result["runs"]]


def test_a_run_whose_scores_are_not_cached_says_what_brings_it_back(repo: Path, tmp_path: Path
                                                                   ) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    sh(clone, "git", "fetch", "-q", "origin", "refs/exps/*:refs/exps/*")
    proc = sh(clone, "rimo-eval", "leaderboard", "m-weak", "m-strong", check=False)
    assert proc.returncode == 1
    assert "missing from the local DVC cache for m-weak (" in proc.stderr
    assert "data/scores/rimo_n.parquet" in proc.stderr
    # No DVC remote in the clone: `dvc exp pull` would fail, so it is not advised (issue 43 §3).
    assert "no DVC remote is configured (`dvc remote list`)" in proc.stderr
    assert "dvc exp pull" not in proc.stderr and "dvc pull" not in proc.stderr
    # With a remote configured, the experiment's pull is what brings it.
    sh(clone, "dvc", "remote", "add", "-q", "store", str(tmp_path / "store"))
    proc = sh(clone, "rimo-eval", "leaderboard", "m-weak", "m-strong", check=False)
    assert "`dvc exp pull <git-remote> m-weak`" in proc.stderr
    sh(clone, "dvc", "remote", "remove", "-q", "store")
    # --all, with the cache but for one table of m-weak: the others are ranked, m-weak is left
    # out with the reason and the command that brings it.
    shutil.copytree(repo / ".dvc/cache", clone / ".dvc/cache")
    sh(clone, "dvc", "checkout", "-q", "score")  # this repo ran up to score
    refs = sh(clone, "git", "for-each-ref", "--format=%(refname)", "refs/exps").stdout.split()
    (weak,) = [r for r in refs if r.endswith("/m-weak")]
    lock = yaml.safe_load(sh(clone, "git", "show", f"{weak}:dvc.lock").stdout)
    md5 = next(o["md5"] for o in lock["stages"]["score"]["outs"]
               if o["path"] == "data/scores/rimo_n.parquet")
    (clone / ".dvc/cache/files/md5" / md5[:2] / md5[2:]).unlink()
    result, _ = leaderboard(clone, [], every=True, **boot(clone))
    assert sorted(r["label"] for r in result["runs"]) == sorted(set(FIVE) - {"m-weak"})
    left = {x["label"]: x["reason"] for x in result["left_out"]}
    assert sorted(left) == sorted(["m-weak", K4, K4B, SAMPLE])
    assert left["m-weak"].startswith("not readable: 1 DVC-tracked output(s) of m-weak missing")
    assert "rerun m-weak here (`dvc exp run`)" in left["m-weak"]


def test_all_ranks_two_full_runs_not_a_later_sample_beside_itself(repo: Path, tmp_path: Path
                                                                  ) -> None:
    """Issue 41 §2: two full runs, then a 5-item sample run last, so the workspace IS the
    sample. --all used to rank the sample twice (workspace and m-sample, a tie of two with the
    full pair that went to the workspace's group); the workspace is now that experiment, ranked
    once, and the two full runs are ranked."""
    copy = copy_repo(repo, tmp_path / "copy")
    sh(copy, "dvc", "exp", "remove", "m-mid", "m-mid2", K4, K4B, SAMPLE)
    # The sample run last: `dvc exp run` leaves its outputs in the workspace.
    sh(copy, "dvc", "exp", "run", "-n", SAMPLE, "score", "-S", "predict.limit=5")
    with RunReader(copy) as reader:
        found = sorted(r.label for r in reader.experiments())
    assert found == sorted(["m-strong", "m-weak", SAMPLE])
    proc = sh(copy, "rimo-eval", "leaderboard", "--all", "--json", "--out", str(tmp_path / "lb"))
    result = json.loads(proc.stdout)
    assert sorted(r["label"] for r in result["runs"]) == ["m-strong", "m-weak"]
    left = {x["label"]: x["reason"] for x in result["left_out"]}
    assert left["workspace"] == (f"the same run as {SAMPLE} (same metrics and provenance): "
                                 f"ranked once, under that name")
    assert left[SAMPLE].startswith("not comparable with m-strong: different items")
    group = ("--all ranks 2 runs, k = 1, 335/456 RIMO-N/RIMO-P items (all items): the largest "
             "of 2 groups of comparable runs (the next has 1)")
    assert result["group"] == group and f"leaderboard: {group}" in proc.stderr


def test_compare_of_the_full_run_against_the_sample_says_so_first(repo: Path) -> None:
    """compare in the same repo (issue 29 §2): the full workspace run against the 5-item
    sample opens with the item sets and compares the shared items only; --strict refuses."""
    proc = sh(repo, "rimo-eval", "compare", "workspace", SAMPLE)
    lines = proc.stdout.splitlines()
    assert lines[0] == f"## RIMO comparison: A = workspace, B = {SAMPLE}"
    assert lines[2] == (
        "**The runs evaluated different items: RIMO-N: 5 shared, 330 only in A, 0 only in B; "
        "RIMO-P: 5 shared, 451 only in A, 0 only in B. Everything below (A, B, Δ, intervals, "
        "tests, flips) is over the shared items only; --strict refuses such a pair.**")
    assert f"compare: workspace and {SAMPLE} evaluated different items" in proc.stderr
    # The sample replays the workspace's own file: over the shared items nothing differs, and
    # the counts are the shared items'.
    cells = [line.strip("| ").split(" | ") for line in lines if line.startswith("| RIMO-")]
    rows = {c[0]: c[1:] for c in cells}
    for name in (f"{TRACK_N}.accuracy", f"{TRACK_P}.prefix_score"):
        assert rows[name][0] == rows[name][1] and rows[name][2] == "+0.000000", rows[name]
    assert rows[f"{TRACK_N}.n"][:3] == ["5", "5", "+0"]
    assert "0 flipped" in proc.stdout
    strict = sh(repo, "rimo-eval", "compare", "workspace", SAMPLE, "--strict", check=False)
    assert strict.returncode == 1 and strict.stdout == ""
    assert (f"workspace and {SAMPLE} are not comparable: different items (RIMO-N: 5 shared, "
            f"330 only in A, 0 only in B") in strict.stderr


def test_year_lens_trend_is_each_runs_own_and_cutoff_adds_unseen(
        repo: Path, five: tuple[dict[str, Any], Path]) -> None:
    """Issue 32: the slope and its interval per run are copied from its breakdown.json;
    ``--cutoff RUN=DATE`` adds that run's unseen subset (the competition's year as its date)."""
    result, out = five
    refs = sh(repo, "git", "for-each-ref", "--format=%(refname)", "refs/exps").stdout.split()
    for row in result["runs"]:
        name = row["revision"]["label"]
        if name == "workspace":
            stored = json.loads((repo / "reports/breakdown.json").read_text())
        else:
            (ref,) = [r for r in refs if r.endswith(f"/{name}")]
            stored = json.loads(sh(repo, "git", "show", f"{ref}:reports/breakdown.json").stdout)
        for track in TRACKS:
            trend, want = row["years"][track]["trend"], stored[track]["year_trend"]
            assert (trend["slope"], trend["slope_ci_low"], trend["slope_ci_high"]) == (
                want["slope"], want["slope_ci_low"], want["slope_ci_high"])
            unseen = row["years"][track]["unseen"]
            if name == "m-weak":
                assert unseen["cutoff"] == "2019-06"
                assert unseen["unseen"]["n"] == (64 if track == TRACK_N else 63)
            else:
                assert unseen is None
    assert (out / "year_heatmap.png").stat().st_size > 0
    # The Markdown and TeX tables: per run and track, the slope with its interval and the
    # unseen rate with its interval, equal to leaderboard.json's (to the digits shown).
    md = (out / "leaderboard.md").read_text().splitlines()
    head = [c.strip() for c in md[2].strip("|").split(" | ")]
    body = [[c.strip() for c in line.strip("|").split(" | ")] for line in md[4:4 + len(FIVE)]]
    tex = (out / "leaderboard.tex").read_text()
    tex_rows = [line.removesuffix(" \\\\").split(" & ") for line in tex.splitlines()
                if line.endswith("\\\\") and " & " in line][1:]
    assert len(tex_rows) == len(body) == len(result["runs"])
    assert "breakdown, not a metric" in "\n".join(md) and "breakdown, not a metric" in tex
    number = re.compile(r"[-+]?\d+\.\d+")
    for row, cells, tex_cells in zip(result["runs"], body, tex_rows, strict=True):
        assert cells[head.index("run")] == row["label"]
        assert cells[head.index("training cutoff")] == (row["years"]["cutoff"] or "-")
        for track, name in ((TRACK_N, "accuracy"), (TRACK_P, "strict")):
            trend = row["years"][track]["trend"]
            col = head.index(f"{track} year slope (breakdown)")
            shown = [float(x) for x in number.findall(cells[col])]
            want = [trend[k] for k in ("slope", "slope_ci_low", "slope_ci_high")]
            assert shown == (pytest.approx(want, abs=5e-4) if want[0] is not None else [])
            unseen = row["years"][track]["unseen"]
            col = head.index(f"{track} unseen {'acc.' if track == TRACK_N else 'strict'} "
                             f"(breakdown)")
            shown = [float(x) for x in number.findall(cells[col])]
            if unseen is None:
                assert cells[col] == "-" and not shown
            else:
                block = unseen["unseen"]
                want = [100 * block[k] for k in (name, f"{name}_ci_low", f"{name}_ci_high")]
                assert shown == pytest.approx(want, abs=0.05) and len(shown) == 3
            assert tex_cells[col] == cells[col]  # the same cell in the paper's table
    assert any(c != "-" for c in (r[head.index(f"{TRACK_N} year slope (breakdown)")]
                                  for r in body))


# --- rimo-eval items over the same runs: read and refused as the leaderboard's ------------------


def _solved_by(repo: Path, names: list[str]) -> dict[tuple[str, str], int]:
    """How many of the runs solved each item, counted from their replay files and the gold of
    the item tables, not from any score table: (track, id) -> runs."""
    gold_n, gold_p = repo_gold(repo)
    solved: dict[tuple[str, str], int] = {(TRACK_N, pid): 0 for pid in gold_n}
    solved.update({(TRACK_P, pid): 0 for pid in gold_p})
    for name in names:
        source = "base" if name == "workspace" else name
        for line in (repo / "runs" / f"{source}.jsonl").read_text().splitlines():
            row = json.loads(line)
            if row.get("sample", 0) != 0:
                continue
            pid, pred = row["problem_id"], row["prediction"]
            right = (pred == gold_n[pid]) if row["track"] == TRACK_N else (
                pid in gold_p and pred == gold_p[pid])
            solved[(row["track"], pid)] += int(right)
    return solved


def test_items_audits_the_comparable_runs_and_refuses_the_others(repo: Path,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "items"
    result = json.loads(sh(repo, "rimo-eval", "items", *FIVE, "--json", "--out",
                           str(out)).stdout)
    assert result["runs"] == FIVE and result["irt"]["converged"]
    expected = _solved_by(repo, FIVE)
    got = {(r["track"], r["problem_id"]): r["solved_by"] for r in result["items"]}
    assert got == expected  # every gradable item of both tracks, sample 0
    assert {f.name for f in out.iterdir()} >= {"items.json", "items.md", "items.html",
                                              "items.png", "suggested_errata.yaml"}
    jsonschema.validate(yaml.safe_load((out / "suggested_errata.yaml").read_text()),
                        ERRATA_SCHEMA)
    # --all: the largest comparable group is the five k = 1 runs, not the k = 4 pair or
    # the sample; the line says so.
    every = sh(repo, "rimo-eval", "items", "--all", "--json", "--out", str(tmp_path / "all"))
    assert sorted(json.loads(every.stdout)["runs"]) == sorted(FIVE)
    assert "5" in every.stderr
    # Too few runs, and runs of another k: refused, saying what the audit needs.
    few = sh(repo, "rimo-eval", "items", "workspace", "m-weak", "--out",
             str(tmp_path / "few"), check=False)
    assert few.returncode == 1 and "at least 3 runs" in few.stderr
    mixed = sh(repo, "rimo-eval", "items", "workspace", "m-weak", K4, "--out",
               str(tmp_path / "mixed"), check=False)
    assert mixed.returncode != 0 and "not comparable" in mixed.stderr
    assert not (tmp_path / "few").exists() and not (tmp_path / "mixed").exists()
