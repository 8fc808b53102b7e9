"""One run's files for the browser, read through DVC at its revision (rimo_eval.commands.runs)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rimo_eval.artifacts.paths import (
    JUDGE_METRICS_PATH,
    JUDGE_TABLE,
    METRICS_PATH,
    items_path,
    predictions_path,
    scores_path,
)
from rimo_eval.artifacts.predictions import TEXT_COLUMNS
from rimo_eval.commands.runs import Revision, RunAt, RunFiles, open_run
from rimo_eval.commands.view.texts import DetailsCursor
from rimo_eval.rimo.tracks import TRACKS


@dataclass
class Run(RunAt):
    """One run as the browser shows it."""

    items: dict[str, pd.DataFrame]
    predictions: dict[str, pd.DataFrame]  # without the text columns (and details: below)
    scores: dict[str, pd.DataFrame]
    judge: pd.DataFrame | None = None  # data/judge/rimo_p.parquet where a judge ran
    # Each sample's details, texts in, read an item at a time from the predictions tables.
    cursors: dict[str, DetailsCursor] = field(default_factory=dict)
    files: RunFiles | None = None  # held open while the cursors read from it
    params: dict[str, Any] = field(default_factory=dict)  # params.yaml at the revision
    # A run still in predict, read from its response cache (view/partial.py): how far it is;
    # its tables then live in ``tmp``, removed by ``close``.
    partial: dict[str, Any] | None = None
    tmp: Path | None = None

    @property
    def label(self) -> str:
        return self.revision.label

    @property
    def k(self) -> int:
        sizes = [int(s["sample"].max()) + 1 for s in self.scores.values()
                 if len(s) and "sample" in s.columns]
        return max(sizes, default=1)

    def sample_details(self, track: str, pid: str, sample: int) -> dict[str, Any]:
        """One sample's details with its reasoning and raw text in."""
        cursor = self.cursors.get(track)
        return {} if cursor is None else cursor.get(pid, sample)

    def close(self) -> None:
        for cursor in self.cursors.values():
            cursor.close()
        self.cursors.clear()
        if self.files is not None:
            self.files.close()
            self.files = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def needed() -> list[Path]:
    return [p for t in TRACKS for p in (items_path(t), predictions_path(t), scores_path(t))]


def load_run(root: Path, revision: Revision) -> Run:
    """Everything the site shows of one run, but the long texts, which it reads as it goes
    (``Run.close`` when done). A table not in the local DVC cache is an error naming every
    absent file and the ``dvc pull`` / ``dvc exp pull`` that brings it."""
    files = open_run(root, revision, needed())
    try:
        metrics = files.read_json(METRICS_PATH) or {}
        items = {t: files.read_parquet(items_path(t)) for t in TRACKS}
        # The sample's details and texts are read as the site is built (``DetailsCursor``).
        cursors = {t: DetailsCursor(files.open(predictions_path(t)), t)
                   for t in TRACKS}
        preds = {t: _light(files, predictions_path(t), cursors[t].names) for t in TRACKS}
        scores = {t: files.read_parquet(scores_path(t)) for t in TRACKS}
        # The opt-in judge's table exists only where reports/judge.json says the judge ran.
        ran = (files.read_json(JUDGE_METRICS_PATH, False) or {}).get("enabled") is True
        judge = files.read_parquet(JUDGE_TABLE) if ran else None
        params = files.read_params()  # score.training_cutoff: the unseen filter
    except BaseException:
        files.close()
        raise
    if judge is not None and not len(judge):
        judge = None
    return Run(revision, metrics, items, preds, scores, judge, cursors, files, params)


def _light(files: RunFiles, path: Path, names: list[str]) -> pd.DataFrame:
    """The columns the grid needs, read from the file in place (never the whole file)."""
    with files.open(path) as handle:
        return pd.read_parquet(handle, columns=[c for c in names
                                                if c not in (*TEXT_COLUMNS, "details")])


__all__ = ["Run", "load_run", "needed"]
