"""One side of a comparison: a run's metrics (joined with its breakdown and provenance), its
per-item scores and its judge record, taken from the run record (rimo_eval.run)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rimo_eval.artifacts.metrics_files import join
from rimo_eval.params.config import PredictParams, ScoreParams
from rimo_eval.rimo.tracks import TRACKS
from rimo_eval.run.record import Run
from rimo_eval.run.revision import Revision


@dataclass
class Side:
    """One side of a comparison."""

    revision: Revision
    metrics: dict[str, Any]
    scores: dict[str, pd.DataFrame]
    judge: Mapping[str, Any] = field(default_factory=dict)  # reports/judge.json, where present
    # Read only when the two runs' items differ and the metrics are recomputed on the shared
    # ones (compare.shared_items): usage and the k-sample keys, the judge's table.
    predictions: dict[str, pd.DataFrame] | None = None
    judge_table: pd.DataFrame | None = None
    model: str | None = None  # the run record's model (reports/model.json's string)
    # The run's own predict and score sections (Run.section: None where absent or unreadable):
    # the price and pass@j of metrics recomputed on the shared items.
    predict: PredictParams | None = None
    score: ScoreParams | None = None

    def summary(self) -> dict[str, Any]:
        prov = self.metrics.get("provenance") or {}
        return {**self.revision.to_json(),
                "model": self.model,
                "predictions": prov.get("predictions"),
                "params_fingerprint": prov.get("params_fingerprint"),
                "commit": (prov.get("git") or {}).get("commit")}


def load_side(run: Run) -> Side:
    """The run's metrics, scores and judge record (read through its reader, still open)."""
    metrics = join(dict(run.metrics), dict(run.breakdown) or None,
                   dict(run.provenance) or None)
    scores = {t: run.scores(t) for t in TRACKS}
    return Side(run.revision, metrics, scores, run.judge, model=run.model,
                predict=run.section(PredictParams, "predict"),
                score=run.section(ScoreParams, "score"))


__all__ = ["Side", "load_side"]
