"""RIMO-N's floor (the best constant answer) and answer types in breakdown.json, against an
independent count of the upstream CSV (issue 45 §1): on the full oracle run, and on a constant
"1" run and a sample of it scored by the real predict and score stages."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from rimo_eval.artifacts.metrics_files import join
from rimo_eval.commands.compare.command import Revision, Side, compare_sides
from rimo_eval.commands.compare.render import render_html, render_markdown
from rimo_eval.commands.summary import summary
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACKS
from rimo_eval.score.stage import score
from rimo_eval.stats.floors import best_constant, floor_line
from tests.support.factories import predict_section, section
from tests.support.pipeline_repo import copy_repo

SCORE = section(ScoreParams, "score", bootstrap={"samples": 100, "seed": 0, "confidence": 0.95})


def upstream_golds(mirror: Path) -> dict[str, str]:
    """problem_id -> answer, read from RIMO-N.csv with the csv module (not the validate stage;
    the CSV already holds erratum E001's 215 for 2023c2)."""
    with (mirror / "RIMO-N.csv").open(encoding="utf-8", newline="") as fh:
        return {r["problem_id"].strip(): r["answer"].strip() for r in csv.DictReader(fh)}


def check_types(block: dict[str, Any], golds: dict[str, str], right: set[str]) -> None:
    """Each answer type's n, right, accuracy and Wilson interval from an independent count."""
    for name, in_type in (("0/1", lambda a: a in ("0", "1")), ("other", lambda a: a not in
                                                                ("0", "1"))):
        ids = [p for p, a in golds.items() if in_type(a)]
        n, k = len(ids), len([p for p in ids if p in right])
        cell = block[name]
        assert (cell["n"], cell["right"]) == (n, k), name
        assert cell["accuracy"] == pytest.approx(k / n, abs=1e-6)
        low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert cell["accuracy_ci_low"] == pytest.approx(low, abs=1e-6)
        assert cell["accuracy_ci_high"] == pytest.approx(high, abs=1e-6)


def test_full_oracle_run_has_the_floor_and_answer_types(oracle_run: Path, mirror_dir: Path
                                                        ) -> None:
    golds = upstream_golds(mirror_dir)
    counts = Counter(golds.values())
    assert (len(golds), counts["1"], counts["0"]) == (335, 73, 23)  # the counts
    breakdown = json.loads((oracle_run / "reports/breakdown.json").read_text(encoding="utf-8"))
    block = breakdown[TRACK_N]
    assert block["baselines"] == {"best_constant": {"answer": "1",
                                                    "accuracy": round(73 / 335, 6), "n": 335}}
    check_types(block["by_answer_type"], golds, right=set(golds))  # the oracle: all right
    metrics = json.loads((oracle_run / "reports/metrics.json").read_text(encoding="utf-8"))
    assert "baselines" not in metrics[TRACK_N] and "by_answer_type" not in metrics[TRACK_N]


@pytest.mark.parametrize("limit", [None, 40])
def test_a_constant_one_run_scores_the_floor(oracle_run: Path, mirror_dir: Path,
                                             tmp_path: Path, limit: int | None) -> None:
    items_dir = oracle_run / "data/items"
    predict(predict_section(backend="constant", limit=limit, sample_seed=3,
                            constant={"answer": "1", "solution": ""}), items_dir,
            tmp_path / "preds")
    score(SCORE, items_dir, tmp_path / "preds", tmp_path / "scores",
          tmp_path / "metrics.json", tmp_path / "plots")
    metrics = json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8"))
    block = json.loads((tmp_path / "breakdown.json").read_text(encoding="utf-8"))[TRACK_N]
    evaluated = set(pd.read_parquet(tmp_path / "scores/rimo_n.parquet")["problem_id"])
    golds = {p: a for p, a in upstream_golds(mirror_dir).items() if p in evaluated}
    assert len(golds) == (335 if limit is None else limit)
    best = block["baselines"]["best_constant"]
    # On these items, a constant "1" run's accuracy is the floor whenever "1" is the best one.
    top = max(Counter(golds.values()).values())
    assert best["n"] == len(golds) and best["accuracy"] == round(top / len(golds), 6)
    if best["answer"] == "1":
        assert metrics[TRACK_N]["accuracy"] == best["accuracy"]
    check_types(block["by_answer_type"], golds, right={p for p, a in golds.items() if a == "1"})

    # compare (terminal and HTML) shows each side's floor over the compared items: with the
    # sample, the oracle side is cut to its items and its floor recomputed there.
    floor = f'a constant "{best["answer"]}" scores {100 * best["accuracy"]:.1f}% on these items'
    result = compare_sides(run_side(oracle_run, "oracle"), run_side(tmp_path, "const"), 50)
    a_line, b_line = (f"A: RIMO-N 100.0% ({floor})",
                      f"B: RIMO-N {100 * metrics[TRACK_N]['accuracy']:.1f}% ({floor})")
    md, page = render_markdown(result), render_html(result)
    for text in (md, page):
        assert "RIMO-N floor and answer types (context, not a metric)" in text
        assert a_line.replace('"', "&#34;") in text if text is page else a_line in text
        assert b_line.replace('"', "&#34;") in text if text is page else b_line in text
    n01 = sum(a in ("0", "1") for a in golds.values())
    ones = sum(a == "1" for a in golds.values())
    assert "| gold 0 or 1 | 100.0% " in md and f"({n01}/{n01}) | {100 * ones / n01:.1f}% [" in md
    assert "RIMO-N.baselines" not in md  # context, not a row of the metric table


def run_side(root: Path, label: str) -> Side:
    """A scored run read from its files, as compare reads a side."""
    reports = root / "reports" if (root / "reports").is_dir() else root
    metrics = join(json.loads((reports / "metrics.json").read_text(encoding="utf-8")),
                   json.loads((reports / "breakdown.json").read_text(encoding="utf-8")))
    scores_dir = root / "data/scores" if (root / "data/scores").is_dir() else root / "scores"
    scores = {t: pd.read_parquet(scores_dir / f"rimo_{t[-1].lower()}.parquet") for t in TRACKS}
    return Side(Revision(label, "workspace", None), metrics, scores, {})


def test_best_constant_ties_and_grading() -> None:
    # Ties go to the smaller integer, then to the string order; the grader strips.
    assert best_constant(["2", "1", "2", "1", "7"])["answer"] == "1"
    assert best_constant(["10", "9", "10", "9"])["answer"] == "9"
    assert best_constant(["b", "a", "3"])["answer"] == "3"
    assert best_constant([" 5", "5 ", "4"]) == {"answer": "5", "accuracy": round(2 / 3, 6),
                                                "n": 3}
    assert best_constant([]) == {"answer": None, "accuracy": None, "n": 0}


def test_floor_line() -> None:
    base = {"best_constant": {"answer": "1", "accuracy": 73 / 335, "n": 335}}
    assert floor_line(TRACK_N, 0.358, base) == \
        'RIMO-N 35.8% (a constant "1" scores 21.8% on these items)'
    assert floor_line(TRACK_N, 0.358, None) == "RIMO-N 35.8%"


def test_the_report_table_of_the_floor(oracle_run: Path) -> None:
    from rimo_eval.report.tables import floor_table, read_metrics

    reports = oracle_run / "reports"
    line, rows = floor_table(read_metrics(reports / "metrics.json", reports / "breakdown.json",
                                          reports / "provenance.json"))
    assert line == 'RIMO-N 100.0% (a constant "1" scores 21.8% on these items)'
    assert rows.values.tolist() == [
        ['a constant "1" (the best constant answer)', "21.8%", "—", "335 items"],
        ["items with gold 0 or 1", "100.0%", "[96.2%, 100.0%]", "96 / 96 items"],
        ["the other items", "100.0%", "[98.4%, 100.0%]", "239 / 239 items"]]


def test_the_summary_puts_the_accuracy_beside_the_floor(oracle_run: Path, tmp_path: Path
                                                        ) -> None:
    repo = copy_repo(oracle_run, tmp_path / "repo")
    first = summary(repo).splitlines()[0]
    assert first == 'RIMO-N 100.0% (a constant "1" scores 21.8% on these items)'
