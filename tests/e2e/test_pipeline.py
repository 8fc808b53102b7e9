"""End to end: the real `dvc repro` on the real 791 items, checked by an independent grader."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.pipeline_repo import make_repo, sh

pytestmark = pytest.mark.slow


def independent_gold(mirror: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The rules re-implemented straight from the upstream files, sharing no project code.

    RIMO-N gold is the CSV answer (what the upstream scripts read; it carries the 2023c2 fix).
    RIMO-P items are gradable when every one of their parts has a reference sub-solution.
    """
    with open(mirror / "RIMO-N.csv", encoding="utf-8", newline="") as fh:
        gold_n = {r["problem_id"]: r["answer"].strip() for r in csv.DictReader(fh)}
    gold_p = {}
    for line in (mirror / "RIMO-P.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        n = int(row["number_of_parts"])
        subs = [row[f"sub-solution{k}"] for k in range(1, n + 1)]
        if all(s and s.strip() for s in subs):
            gold_p[row["problem_id"]] = [s.strip() for s in subs]
    return gold_n, gold_p


def independent_metrics(gold_n: dict[str, str], gold_p: dict[str, list[str]],
                        pred_n: dict[str, str], pred_p: dict[str, list[str]]) -> dict:
    acc = sum(pred_n.get(i, "\0").strip() == g for i, g in gold_n.items()) / len(gold_n)
    strict = matched = parts = prefix = 0.0
    for pid, gold in gold_p.items():
        pred = pred_p.get(pid, [])
        ok = [k < len(pred) and pred[k].strip() == gold[k] for k in range(len(gold))]
        strict += len(pred) == len(gold) and all(ok)
        matched += sum(ok)
        parts += len(gold)
        lead = next((k for k, v in enumerate(ok) if not v), len(ok))
        prefix += lead / len(gold)
    return {"accuracy": acc, "strict": strict / len(gold_p), "sub": matched / parts,
            "prefix": prefix / len(gold_p)}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, mirror_dir: Path) -> Path:
    repo = make_repo(tmp_path_factory.mktemp("e2e") / "repo", mirror_dir)
    sh(repo, "dvc", "repro")
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


def test_replay_experiment_matches_independent_grader(repo: Path, mirror_dir: Path) -> None:
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
    sh(repo, "dvc", "exp", "run", "-S", "predict.backend=replay",
       "-S", f"predict.replay.path={replay.name}")
    m = read_metrics(repo)
    want = independent_metrics(gold_n, gold_p, pred_n, pred_p)
    assert m["RIMO-N"]["n"] == 335 and m["RIMO-N"]["missing"] == len(ids_n) - len(pred_n)
    assert m["RIMO-N"]["accuracy"] == pytest.approx(want["accuracy"], abs=1e-6)
    assert m["RIMO-P"]["strict"] == pytest.approx(want["strict"], abs=1e-6)
    assert m["RIMO-P"]["sub_problem_accuracy"] == pytest.approx(want["sub"], abs=1e-6)
    assert m["RIMO-P"]["prefix_score"] == pytest.approx(want["prefix"], abs=1e-6)
    assert 0.0 < m["RIMO-N"]["accuracy"] < 1.0
    shown = json.loads(sh(repo, "dvc", "exp", "show", "--json").stdout)
    assert "predict.backend" in json.dumps(shown) or "replay" in json.dumps(shown)
