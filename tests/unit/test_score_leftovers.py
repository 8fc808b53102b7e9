"""Score leftovers of issue 17 §10: a zero-item sample, and the sample spec as provenance
(tests/e2e/test_metrics_diff_sample.py runs `dvc metrics diff` on it)."""

from __future__ import annotations

import json
from pathlib import Path

from rimo_eval.artifacts.metrics_files import read_all
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.scored_runs import run_score


def test_score_accepts_a_zero_item_sample(tmp_path: Path) -> None:
    """predict.limit: 0 gives two empty predictions tables; score grades them as nothing
    evaluated (no metric, no interval) instead of a KeyError."""
    m = run_score(tmp_path, 0)
    assert m[TRACK_N]["n"] == 0 and m[TRACK_N]["accuracy"] is None
    assert m[TRACK_P]["n"] == 0 and m[TRACK_P]["strict"] is None
    assert m["sample"]["evaluated"] == {TRACK_N: 0, TRACK_P: 0}
    assert m["sample"]["is_sample"] is True and m["sample"]["limit"] == 0


def test_the_sample_spec_is_provenance_not_a_metric(tmp_path: Path) -> None:
    m = run_score(tmp_path, 3)
    reports = tmp_path / "reports"
    on_disk = json.loads((reports / "metrics.json").read_text(encoding="utf-8"))
    assert set(on_disk["sample"]) == {"evaluated", "total", "is_sample"}
    prov = json.loads((reports / "provenance.json").read_text(encoding="utf-8"))
    assert prov["sample"] == {"limit": 3, "seed": 0}
    # Readers of the joined block (the report's banner) still find it where it was.
    joined = read_all(reports / "metrics.json", reports / "breakdown.json",
                      reports / "provenance.json")
    assert joined["sample"] == m["sample"]
    assert (joined["sample"]["limit"], joined["sample"]["seed"]) == (3, 0)
