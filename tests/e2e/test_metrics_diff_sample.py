"""`dvc metrics diff` of a sample against a full run lists only numbers that compare: the
sample's predict.limit is provenance, not a metric (issue 17 §10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rimo_eval.rimo.tracks import TRACK_N
from tests.support.pipeline_repo import sh
from tests.support.scored_runs import run_score

pytestmark = pytest.mark.slow


def test_metrics_diff_of_a_sample_against_a_full_run_lists_no_limit(tmp_path: Path) -> None:
    """The real `dvc metrics diff`: a full run (limit null) committed, a sample in the
    workspace. Only numbers that compare are listed; predict.limit is not among them."""
    sh(tmp_path, "git", "init", "-q")
    sh(tmp_path, "dvc", "init", "-q")
    (tmp_path / "dvc.yaml").write_text("metrics:\n  - reports/metrics.json\n")
    run_score(tmp_path, None)
    sh(tmp_path, "git", "add", "dvc.yaml", "reports/metrics.json", ".dvc")
    sh(tmp_path, "git", "commit", "-qm", "full run")
    run_score(tmp_path, 2)
    diff = json.loads(sh(tmp_path, "dvc", "metrics", "diff", "--json").stdout)
    changed = diff["reports/metrics.json"]
    assert changed[f"{TRACK_N}.n"] == {"old": 4, "new": 2, "diff": -2}
    assert not [k for k in changed if k.startswith("sample.") and k.split(".")[1] in
                ("limit", "seed")], changed
