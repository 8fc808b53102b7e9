"""One run's files for the browser, read through DVC at its revision (compare's RunFiles)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from stages.commands.compare.revisions import Revision, RunFiles
from stages.core.artifacts import (
    JUDGE_METRICS_PATH,
    JUDGE_TABLE,
    METRICS_PATH,
    items_path,
    predictions_path,
    scores_path,
)
from stages.core.missing import require_outputs
from stages.core.tracks import TRACKS


@dataclass
class Run:
    revision: Revision
    metrics: dict[str, Any]
    items: dict[str, pd.DataFrame]
    predictions: dict[str, pd.DataFrame]
    scores: dict[str, pd.DataFrame]
    judge: pd.DataFrame | None = None  # data/judge/rimo_p.parquet where a judge ran
    details: dict[str, dict[tuple[str, int], dict[str, Any]]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.revision.label

    @property
    def k(self) -> int:
        sizes = [int(s["sample"].max()) + 1 for s in self.scores.values()
                 if len(s) and "sample" in s.columns]
        return max(sizes, default=1)


def needed(revision: Revision) -> list[Path]:
    return [p for t in TRACKS for p in (items_path(t), predictions_path(t), scores_path(t))]


def load_run(root: Path, revision: Revision) -> Run:
    """Everything the site shows of one run. A table not in the local DVC cache is an error
    naming every absent file and the ``dvc pull`` / ``dvc exp pull`` that brings it."""
    require_outputs(root, revision.rev, revision.label, revision.kind == "experiment",
                    only=needed(revision))
    with RunFiles(root, revision) as files:
        metrics = files.read_json(METRICS_PATH) or {}
        items = {t: files.read_parquet(items_path(t)) for t in TRACKS}
        preds = {t: files.read_parquet(predictions_path(t)) for t in TRACKS}
        scores = {t: files.read_parquet(scores_path(t)) for t in TRACKS}
        # The opt-in judge's table exists only where reports/judge.json says the judge ran.
        ran = (files.read_json(JUDGE_METRICS_PATH, False) or {}).get("enabled") is True
        judge = files.read_parquet(JUDGE_TABLE) if ran else None
    if judge is not None and not len(judge):
        judge = None
    details = {t: details_by_sample(frame) for t, frame in preds.items()}
    return Run(revision, metrics, items, preds, scores, judge, details)


def details_by_sample(preds: pd.DataFrame) -> dict[tuple[str, int], dict[str, Any]]:
    """Each row's ``details`` JSON, by (problem_id, sample)."""
    samples = preds["sample"] if "sample" in preds.columns else [0] * len(preds)
    return {(str(pid), int(s)): _details(raw)
            for pid, s, raw in zip(preds["problem_id"], samples, preds["details"], strict=True)}


def _details(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


__all__ = ["Run", "details_by_sample", "load_run", "needed"]
