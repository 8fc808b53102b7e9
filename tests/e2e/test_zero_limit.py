"""`predict.limit: 0` through the whole pipeline and the real DVC CLI: an empty sample is a
run that evaluated nothing, said so, not a crash in score (issue 17 §10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.pipeline_repo import sh
from tests.support.validated_repo import validated_copy

pytestmark = pytest.mark.slow


def test_dvc_repro_with_limit_zero_audits_and_summarises(tmp_path: Path,
                                                          validated_base: Path) -> None:
    repo = validated_copy(validated_base, tmp_path / "repo",
                          predict={"backend": "oracle", "limit": 0})
    sh(repo, "dvc", "repro")
    metrics = json.loads((repo / "reports/metrics.json").read_text(encoding="utf-8"))
    assert metrics[TRACK_N]["n"] == 0 and metrics[TRACK_N]["accuracy"] is None
    assert metrics[TRACK_P]["n"] == 0 and metrics["sample"]["is_sample"] is True
    audit = sh(repo, "rimo-eval", "audit", check=False)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    summary = sh(repo, "rimo-eval", "summary").stdout
    first, second = summary.splitlines()[:2]
    assert first == "RIMO-N —"  # no item, no floor: nothing to put beside it
    assert second.startswith("run: SAMPLE of 0/335 RIMO-N, 0/456 RIMO-P items "
                             "(predict.limit 0, seed 0)")
    # The tables are there, with no rows: not a clone that needs `dvc pull`.
    assert "backend: none recorded (the predictions tables have no rows)" in summary
