"""``Run``: one evaluation run as every tool reads it (rimo_eval.run.reader opens it).

Its small files are read once, when the run is opened: metrics.json as stored, the breakdown,
the provenance, the judge's record, params.yaml (parsed leniently: a run is shown whatever its
params say; ``Run.section`` types one section of it), and the two facts every tool shows: the
model (reports/model.json's string) and k. The tables (items, predictions, scores, the judge's)
are read when asked, only the columns asked, through the revision's DVC file system, which the
reader keeps open.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from rimo_eval.artifacts.metrics_files import k_of
from rimo_eval.artifacts.paths import JUDGE_TABLE, items_path, predictions_path, scores_path
from rimo_eval.params.section import Section
from rimo_eval.run.files import RunFiles, TableSource
from rimo_eval.run.revision import Revision

S = TypeVar("S", bound=Section)


@dataclass(frozen=True)
class Run:
    """One run. ``judge`` is reports/judge.json's nested record (rimo_eval.artifacts.judge_record:
    ``{"enabled": False}`` where the judge never ran); ``params_error`` says why params.yaml
    could not be read where it could not (``params`` is then {})."""

    revision: Revision
    metrics: Mapping[str, Any]
    breakdown: Mapping[str, Any]
    provenance: Mapping[str, Any]
    judge: Mapping[str, Any]
    params: Mapping[str, Any]
    model: str
    k: int
    content: str  # a digest of what the run holds: the same run under two names (dedupe)
    params_error: str | None = None
    files: RunFiles = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    @property
    def label(self) -> str:
        return self.revision.label

    def section(self, model: type[S], key: str) -> S | None:
        """``key`` of the run's params.yaml (dotted: ``score.bootstrap``) as the typed
        ``model``; None where the file does not set it, or sets what the model refuses (an
        older file): lenient, as the rest of the record."""
        from rimo_eval.run.params import section_or_none

        return section_or_none(self.params, model, key)

    @property
    def judged(self) -> bool:
        """Whether the judge ran (its table then holds the verdicts)."""
        return bool(self.judge.get("enabled"))

    def table(self, path: Path, columns: list[str] | None = None) -> pd.DataFrame:
        return self.files.read_parquet(path, columns)

    def items(self, track: str, columns: list[str] | None = None) -> pd.DataFrame:
        return self.table(items_path(track), columns)

    def predictions(self, track: str, columns: list[str] | None = None) -> pd.DataFrame:
        return self.table(predictions_path(track), columns)

    def scores(self, track: str, columns: list[str] | None = None) -> pd.DataFrame:
        return self.table(scores_path(track), columns)

    def judge_table(self) -> pd.DataFrame | None:
        """The judge's verdicts, part by part; None where the judge did not run."""
        if not self.judged:
            return None
        table = self.table(JUDGE_TABLE)
        return table if len(table) else None

    def source(self, path: Path) -> TableSource:
        """A table of the run as Arrow reads it (rimo_eval.run.files.TableSource): read a row
        group at a time by pyarrow.parquet.ParquetFile, which closes it."""
        return self.files.source(path)

    def read_json(self, path: Path, required: bool = True) -> dict[str, Any] | None:
        return self.files.read_json(path, required)

    def exists(self, path: Path) -> bool:
        return self.files.exists(path)


__all__ = ["Run", "k_of"]
