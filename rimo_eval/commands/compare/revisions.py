"""One side of a comparison: a run's metrics (joined with its breakdown and provenance), its
per-item scores and its judge record, taken from the run record (rimo_eval.run)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pandas as pd

from rimo_eval.artifacts.metrics_files import join
from rimo_eval.errors import ConfigError
from rimo_eval.io.terminal import for_terminal
from rimo_eval.params.config import PredictParams, ScoreParams
from rimo_eval.params.section import Section
from rimo_eval.rimo.tracks import TRACKS
from rimo_eval.run.params import typed_section
from rimo_eval.run.record import Run
from rimo_eval.run.revision import Revision

S = TypeVar("S", bound=Section)


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
                predict=_section(run, PredictParams, "predict"),
                score=_section(run, ScoreParams, "score"))


def _section(run: Run, model: type[S], key: str) -> S | None:
    """``Run.section``, saying so where the run's file sets the section and this version
    refuses it (an older file): a recount on the shared items then takes the defaults for it
    (pass@1 only, no cutoff, no price), which the user must know."""
    try:
        return typed_section(run.params, model, key)
    except ConfigError as exc:
        print(for_terminal(f"compare: {run.revision.label}: its params.yaml {key} section is "
                           f"not read here ({str(exc).splitlines()[0]}); a recount on the "
                           f"shared items takes the defaults for it"), file=sys.stderr)
        return None


__all__ = ["Side", "load_side"]
