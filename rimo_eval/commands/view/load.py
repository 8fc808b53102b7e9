"""One run as the browser shows it, taken from the run record (rimo_eval.run)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rimo_eval.artifacts.metrics_files import k_of
from rimo_eval.artifacts.paths import items_path, predictions_path, scores_path
from rimo_eval.artifacts.predictions import TEXT_COLUMNS
from rimo_eval.commands.view.texts import DetailsCursor
from rimo_eval.rimo.tracks import TRACKS
from rimo_eval.run.reader import RunReader
from rimo_eval.run.revision import Revision


@dataclass
class Run:
    """One run as the browser shows it: the record's facts (``model`` and ``k`` as every tool
    shows them) and the tables the site is made from."""

    revision: Revision
    metrics: Mapping[str, Any]
    items: dict[str, pd.DataFrame]
    predictions: dict[str, pd.DataFrame]  # without the text columns (and details: below)
    scores: dict[str, pd.DataFrame]
    judge: pd.DataFrame | None = None  # data/judge/rimo_p.parquet where a judge ran
    # Each sample's details, texts in, read an item at a time from the predictions tables.
    cursors: dict[str, DetailsCursor] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)  # params.yaml at the revision
    # A run still in predict, read from its response cache (view/partial.py): how far it is;
    # its tables then live in ``tmp``, removed by ``close``.
    partial: dict[str, Any] | None = None
    tmp: Path | None = None
    model: str = ""
    k: int = 0  # 0: as the run's metrics.json records it (run.record.k_of)

    def __post_init__(self) -> None:
        if not self.k:
            self.k = k_of(self.metrics)

    @property
    def label(self) -> str:
        return self.revision.label

    def sample_details(self, track: str, pid: str, sample: int) -> dict[str, Any]:
        """One sample's details with its reasoning and raw text in."""
        cursor = self.cursors.get(track)
        return {} if cursor is None else cursor.get(pid, sample)

    def close(self) -> None:
        for cursor in self.cursors.values():
            cursor.close()
        self.cursors.clear()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def needed() -> list[Path]:
    return [p for t in TRACKS for p in (items_path(t), predictions_path(t), scores_path(t))]


def load_run(reader: RunReader, revision: Revision) -> Run:
    """Everything the site shows of one run, but the long texts, which it reads as it goes
    (``Run.close`` when done; the reader keeps the files open). A table that is not here is
    an error naming every absent file and what brings it back."""
    record = reader.open(revision, needed())
    cursors: dict[str, DetailsCursor] = {}
    try:
        items = {t: record.items(t) for t in TRACKS}
        # The sample's details and texts are read as the site is built (``DetailsCursor``).
        for t in TRACKS:
            cursors[t] = DetailsCursor(record.source(predictions_path(t)), t)
        preds = {t: record.predictions(t, [c for c in cursors[t].names
                                           if c not in (*TEXT_COLUMNS, "details")])
                 for t in TRACKS}
        scores = {t: record.scores(t) for t in TRACKS}
        judge = record.judge_table()  # where judge.json's record says the judge ran
    except BaseException:
        for cursor in cursors.values():
            cursor.close()
        raise
    return Run(revision, record.metrics, items, preds, scores, judge, cursors, record.params,
               model=record.model, k=record.k)


__all__ = ["Run", "load_run", "needed"]
