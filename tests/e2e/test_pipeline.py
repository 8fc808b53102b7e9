"""End to end: the real `dvc repro` on the real 791 items, checked by an independent grader."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.rimo.tracks import TRACK_N, TRACKS
from rimo_eval.run.reader import RunReader
from tests.support.independent_grader import independent_gold, independent_metrics
from tests.support.pipeline_repo import copy_repo, sh

pytestmark = pytest.mark.slow

REPLAY_EXP = "replay-mix"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, oracle_run: Path) -> Path:
    repo = copy_repo(oracle_run, tmp_path_factory.mktemp("e2e") / "repo")
    return repo


def read_metrics(repo: Path) -> dict:
    return json.loads((repo / "reports/metrics.json").read_text())


def test_oracle_scores_one_on_all_items(repo: Path) -> None:
    m = read_metrics(repo)
    assert m["RIMO-N"]["accuracy"] == 1.0 and m["RIMO-N"]["n"] == 335
    assert m["RIMO-P"]["strict"] == 1.0 and m["RIMO-P"]["n"] == 454
    assert m["RIMO-P"]["sub_problem_accuracy"] == 1.0 and m["RIMO-P"]["prefix_score"] == 1.0
    assert m["RIMO-P"]["ungradable"] == 2
    breakdown = json.loads((repo / "reports/breakdown.json").read_text())
    assert set(breakdown["RIMO-N"]["by_domain"]) == {"algebra", "combinatorics", "geometry",
                                                     "number theory"}
    validation = json.loads((repo / "reports/validation.json").read_text())
    assert "2023c2" in json.dumps(validation)
    for out in ("reports/report.html", "reports/report.ipynb", "data/items/rimo_n.parquet"):
        assert (repo / out).is_file()


def test_second_repro_reruns_nothing(repo: Path) -> None:
    before = {p: p.read_bytes() for p in (repo / "reports").rglob("*") if p.is_file()}
    out = sh(repo, "dvc", "repro")
    text = out.stdout + out.stderr
    assert "Running stage" not in text, text
    assert "Data and pipelines are up to date" in sh(repo, "dvc", "status").stdout
    assert {p: p.read_bytes() for p in before} == before


def test_editing_the_browser_reruns_the_view_stage_alone(repo: Path) -> None:
    """The view is a stage (issue 29 §4), but a cheap one: its code is none of the paid
    predict's deps, so an edit to the browser marks the view stage and nothing else."""
    app = repo / "rimo_eval/commands/view/assets/app.js"
    before = app.read_bytes()
    app.write_bytes(before + b"\n// an edit to the browser\n")
    try:
        changed = json.loads(sh(repo, "dvc", "status", "--json").stdout or "{}")
    finally:
        app.write_bytes(before)
    assert set(changed) == {"view"}, changed
    assert "Data and pipelines are up to date" in sh(repo, "dvc", "status").stdout


@pytest.fixture(scope="module")
def replay_exp(repo: Path, mirror_dir: Path) -> dict[str, Any]:
    """Experiment REPLAY_EXP: the whole pipeline on a replay of known right, wrong and missing
    answers; what went into it."""
    gold_n, gold_p = independent_gold(mirror_dir)
    ids_n, ids_p = sorted(gold_n), sorted(gold_p)
    # Known mix: right, right-with-spaces, wrong, and left out (missing) answers.
    pred_n = {}
    for k, pid in enumerate(ids_n):
        if k % 4 == 0:
            pred_n[pid] = gold_n[pid]
        elif k % 4 == 1:
            pred_n[pid] = f"  {gold_n[pid]}\n"
        elif k % 4 == 2:
            pred_n[pid] = gold_n[pid] + "0"
    pred_p = {}
    for k, pid in enumerate(ids_p):
        gold = gold_p[pid]
        if k % 3 == 0:
            pred_p[pid] = list(gold)
        elif k % 3 == 1:
            pred_p[pid] = [gold[0], *["wrong"] * (len(gold) - 1)]
        else:
            pred_p[pid] = ["wrong", *gold[1:]]
    replay = repo / "replay.jsonl"
    with open(replay, "w", encoding="utf-8") as fh:
        for pid, p in pred_n.items():
            fh.write(json.dumps({"track": "RIMO-N", "problem_id": pid, "prediction": p}) + "\n")
        for pid, p in pred_p.items():
            fh.write(json.dumps({"track": "RIMO-P", "problem_id": pid, "prediction": p}) + "\n")
    sh(repo, "dvc", "exp", "run", "-n", REPLAY_EXP, "-S", "predict.backend=replay",
       "-S", f"predict.replay.path={replay.name}")
    return {"gold_n": gold_n, "gold_p": gold_p, "pred_n": pred_n, "pred_p": pred_p}


def test_replay_experiment_matches_independent_grader(repo: Path, replay_exp: dict[str, Any]
                                                      ) -> None:
    gold_n, gold_p, pred_n, pred_p = (replay_exp[k] for k in ("gold_n", "gold_p", "pred_n",
                                                              "pred_p"))
    ids_n = sorted(gold_n)
    with RunReader(repo) as reader:
        m = dict(reader.open(REPLAY_EXP).metrics)
    want = independent_metrics(gold_n, gold_p, pred_n, pred_p)
    assert m["RIMO-N"]["n"] == 335 and m["RIMO-N"]["missing"] == len(ids_n) - len(pred_n)
    assert m["RIMO-N"]["accuracy"] == pytest.approx(want["accuracy"], abs=1e-6)
    assert m["RIMO-P"]["strict"] == pytest.approx(want["strict"], abs=1e-6)
    assert m["RIMO-P"]["sub_problem_accuracy"] == pytest.approx(want["sub"], abs=1e-6)
    assert m["RIMO-P"]["prefix_score"] == pytest.approx(want["prefix"], abs=1e-6)
    assert 0.0 < m["RIMO-N"]["accuracy"] < 1.0
    shown = json.loads(sh(repo, "dvc", "exp", "show", "--json").stdout)
    assert "predict.backend" in json.dumps(shown) or "replay" in json.dumps(shown)


# --- the report's view is its own run's (issue 29 §4) -------------------------------------------

VIEW_LINK = re.compile(r'href="(view/index\.html)[#"]')


def linked_view(repo: Path) -> dict[str, Any]:
    """The index of the site the workspace's report links to."""
    report = repo / "reports/report.html"
    links = set(VIEW_LINK.findall(report.read_text(encoding="utf-8")))
    assert links == {"view/index.html"}, links
    text = (report.parent / "view/data/index.js").read_text(encoding="utf-8")
    assert text.startswith("RIMO.index(") and text.endswith(");\n")
    return json.loads(text[len("RIMO.index("):-3])


def outcomes(index: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(it["track"], it["id"]): it["o"][0] for it in index["items"]}


def expected(repo: Path, name: str) -> dict[tuple[str, str], str]:
    """Each item's outcome in experiment ``name``, from its own score tables (read through
    DVC at the experiment, not from the workspace): R right, S strict, else not right."""
    out = {}
    with RunReader(repo) as reader:
        run = reader.open(name)
        for track in TRACKS:
            frame = run.scores(track)
            col = "correct" if track == TRACK_N else "strict"
            out |= {(track, pid): ok for pid, ok in zip(frame["problem_id"], frame[col],
                                                        strict=True)}
    return out


def assert_view_of(repo: Path, name: str, backend: str, sample: bool) -> None:
    index = linked_view(repo)
    (run,) = index["runs"]
    assert (run["backend"], run["is_sample"]) == (backend, sample), name
    got, want = outcomes(index), expected(repo, name)
    evaluated = {key for key, o in got.items() if o != "-"}
    assert evaluated == set(want), name  # the run's own items, no other run's
    for key, right in want.items():
        assert (got[key] in ("R", "S")) == bool(right), (name, key, got[key])


def test_report_links_to_the_view_of_the_applied_experiment(repo: Path,
                                                            replay_exp: dict[str, Any]) -> None:
    """Two experiments of the whole pipeline, then `dvc exp apply` of each: the site the
    report links to is the applied run's (backend, sample, every item's outcome), restored
    from the DVC cache without a rerun. Before the view stage, reports/view/ stayed whatever
    `rimo-eval view` last built."""
    sh(repo, "dvc", "exp", "run", "-n", "const-5", "-S", "predict.backend=constant",
       "-S", "predict.limit=5")
    assert_view_of(repo, "const-5", "constant", True)
    for name, backend, sample in ((REPLAY_EXP, "replay", False), ("const-5", "constant", True)):
        sh(repo, "dvc", "exp", "apply", name)
        assert_view_of(repo, name, backend, sample)
        assert "Data and pipelines are up to date" in sh(repo, "dvc", "status").stdout
