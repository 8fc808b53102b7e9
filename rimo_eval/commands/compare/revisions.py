"""One side of a comparison: a run's metrics, per-item scores and judge metrics, read through
the run-loading layer (rimo_eval.commands.runs, whose names are also importable from here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rimo_eval.artifacts.paths import (
    BREAKDOWN_PATH,
    JUDGE_METRICS_PATH,
    METRICS_PATH,
    PROVENANCE_PATH,
    scores_path,
)
from rimo_eval.commands.runs import (
    WORKSPACE,
    Revision,
    RunAt,
    RunFiles,
    baseline_experiments,
    commit_date,
    resolve,
)
from rimo_eval.core.metrics_files import join
from rimo_eval.rimo.tracks import TRACKS


@dataclass
class Side(RunAt):
    """One side of a comparison."""

    scores: dict[str, pd.DataFrame]
    judge: dict[str, Any] = field(default_factory=dict)  # reports/judge.json, where present
    # Read only when the two runs' items differ and the metrics are recomputed on the shared
    # ones (compare.shared_items): usage and the k-sample keys, the judge's table.
    predictions: dict[str, pd.DataFrame] | None = None
    judge_table: pd.DataFrame | None = None

    def summary(self) -> dict[str, Any]:
        prov = self.metrics.get("provenance") or {}
        return {**self.revision.to_json(),
                "predictions": prov.get("predictions"),
                "params_fingerprint": prov.get("params_fingerprint"),
                "commit": (prov.get("git") or {}).get("commit")}


def load_side(root: Path, revision: Revision, files: RunFiles | None = None) -> Side:
    """One run's metrics, scores and judge metrics; through ``files`` when the caller holds
    the revision's RunFiles open for more reads (it stays open), else through its own."""
    if files is None:
        with RunFiles(root, revision) as own:
            return load_side(root, revision, own)
    metrics = join(files.read_json(METRICS_PATH) or {},
                   files.read_json(BREAKDOWN_PATH, False),
                   files.read_json(PROVENANCE_PATH, False))
    scores = {t: files.read_parquet(scores_path(t)) for t in TRACKS}
    # The opt-in judge's metrics exist only where the judge ran.
    judge = files.read_json(JUDGE_METRICS_PATH, False) or {}
    return Side(revision, metrics, scores, judge)


__all__ = ["WORKSPACE", "Revision", "RunFiles", "Side", "baseline_experiments", "commit_date",
           "load_side", "resolve"]
