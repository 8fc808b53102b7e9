"""One run as the export reads it (``ExportRun``), and the one function that reads it
(``load_export_run``): the metrics, params, model and date whole, the items and scores tables
(small: no reply text), and the predictions tables opened, to be read a row group at a time
(a k = 64 reasoning run's texts are gigabytes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rimo_eval.rimo.tracks import TRACKS

if TYPE_CHECKING:
    from rimo_eval.run.files import TableSource


@dataclass
class ExportRun:
    """What the export needs of a run. ``predictions_table(track)``: that track's predictions
    table as Arrow reads it (rimo_eval.run.files.TableSource)."""

    label: str  # the run as the user named it
    rev: str | None  # its commit; None for the workspace
    date: str | None  # ISO 8601: the commit's date (the workspace: HEAD's)
    metrics: dict[str, Any]  # metrics.json, breakdown and provenance joined (``ci`` per track)
    params: dict[str, Any]  # params.yaml at the revision
    model: str  # reports/model.json's name
    items: dict[str, pd.DataFrame]
    scores: dict[str, pd.DataFrame]
    predictions_table: Callable[[str], TableSource]
    close: Callable[[], None] = field(default=lambda: None)


def load_export_run(root: Path, name: str) -> ExportRun:
    """The run ``name`` (workspace, git revision, branch or DVC experiment) of the repository
    at ``root``, through the run reader (rimo_eval.run): nothing checked out, a missing table
    named with what brings it back."""
    from rimo_eval.artifacts.metrics_files import join
    from rimo_eval.artifacts.paths import items_path, predictions_path, scores_path
    from rimo_eval.io.git import git
    from rimo_eval.run.reader import RunReader

    reader = RunReader(root)
    try:
        revision = reader.resolve(name)
        run = reader.open(revision, [p(t) for t in TRACKS
                                     for p in (items_path, predictions_path, scores_path)])
        if revision.rev is None:  # the workspace: the commit it is on
            date = (git(root, "show", "-s", "--format=%cI", "HEAD") or "").strip() or None
        else:
            date = reader.commit_date(revision)
        return ExportRun(
            label=revision.label, rev=revision.rev, date=date,
            metrics=join(dict(run.metrics), dict(run.breakdown), dict(run.provenance)),
            params=dict(run.params), model=run.model,
            items={t: run.items(t) for t in TRACKS}, scores={t: run.scores(t) for t in TRACKS},
            predictions_table=lambda t: run.source(predictions_path(t)), close=reader.close)
    except BaseException:
        reader.close()
        raise


__all__ = ["ExportRun", "load_export_run"]
