"""One run as the export reads it (``ExportRun``), and the one function that reads it
(``load_export_run``): the metrics, params, model and date whole, the items and scores tables
(small: no reply text), and the predictions tables opened, to be read a row group at a time
(a k = 64 reasoning run's texts are gigabytes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from rimo_eval.core.tracks import TRACKS


@dataclass
class ExportRun:
    """What the export needs of a run. ``open_predictions(track)`` opens that track's
    predictions table (a seekable binary file; the caller closes it)."""

    label: str  # the run as the user named it
    rev: str | None  # its commit; None for the workspace
    date: str | None  # ISO 8601: the commit's date (the workspace: HEAD's)
    metrics: dict[str, Any]  # metrics.json, breakdown and provenance joined (``ci`` per track)
    params: dict[str, Any]  # params.yaml at the revision
    model: str  # reports/model.json's name
    items: dict[str, pd.DataFrame]
    scores: dict[str, pd.DataFrame]
    open_predictions: Callable[[str], BinaryIO]
    close: Callable[[], None] = field(default=lambda: None)


def load_export_run(root: Path, name: str) -> ExportRun:
    """The run ``name`` (workspace, git revision, branch or DVC experiment) of the repository
    at ``root``, read through DVC at its revision (nothing checked out). The one reader of the
    export: swap this function for the typed run reader when it lands."""
    from rimo_eval.commands.runs import commit_date, open_run, resolve
    from rimo_eval.core.artifacts import (
        BREAKDOWN_PATH,
        METRICS_PATH,
        MODEL_PATH,
        PROVENANCE_PATH,
        items_path,
        predictions_path,
        scores_path,
    )
    from rimo_eval.core.git import git
    from rimo_eval.core.metrics_files import join

    revision = resolve(root, name)
    needed = [p for t in TRACKS for p in (items_path(t), predictions_path(t), scores_path(t))]
    files = open_run(root, revision, needed)
    try:
        metrics = join(files.read_json(METRICS_PATH) or {},
                       files.read_json(BREAKDOWN_PATH, False),
                       files.read_json(PROVENANCE_PATH, False))
        model = (files.read_json(MODEL_PATH, False) or {}).get("model")
        if revision.rev is None:  # the workspace: the commit it is on
            date = (git(root, "show", "-s", "--format=%cI", "HEAD") or "").strip() or None
        else:
            date = commit_date(root, revision)
        return ExportRun(
            label=revision.label, rev=revision.rev, date=date, metrics=metrics,
            params=files.read_params(), model=str(model) if model else _backend(metrics),
            items={t: files.read_parquet(items_path(t)) for t in TRACKS},
            scores={t: files.read_parquet(scores_path(t)) for t in TRACKS},
            open_predictions=lambda t: files.open(predictions_path(t)), close=files.close)
    except BaseException:
        files.close()
        raise


def _backend(metrics: dict[str, Any]) -> str:
    """A run without model.json: named by its backend, as model.json would name it."""
    preds = (metrics.get("provenance") or {}).get("predictions") or {}
    found = {str(v.get("backend")) for v in preds.values() if isinstance(v, dict)}
    return found.pop() if len(found) == 1 else "unknown"


__all__ = ["ExportRun", "load_export_run"]
