"""``rimo-eval view --partial``: a run whose predict is still going (or was killed), shown from
what its response cache holds so far.

The run's params.yaml (at its revision) says which requests predict sends: the backend's
section, the items (the validated tables at that revision, ``predict.limit`` and
``sample_seed`` picking them as predict does) and ``predict.samples``.
``rimo_eval.predictors.cached`` looks each one up, read-only, in the cache that predict writes
(the backend's ``cache_dir``, a relative one against the project root, as predict resolves it).
The samples found whole are graded with score's own functions (``score_n``/``score_p``); the
others are ``pending``: no outcome, shown as not yet evaluated, never counted wrong. The run has
no metrics (the site shows none), and the page says "partial" with how many requests of how
many were answered and when the newest was stored: a fact of the cache, so the same cache
contents give a byte-identical site.

The tables are written to a private temporary folder (removed by ``Run.close``) so the page is
built by the same code, an item at a time, as a finished run's.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from rimo_eval.artifacts.items import Item, items_path, rows_to_items
from rimo_eval.artifacts.model_name import run_label
from rimo_eval.artifacts.predictions import (
    TEXT_COLUMNS,
    predictions_path,
    run_id,
    table_groups,
    table_schema,
    write_groups,
)
from rimo_eval.artifacts.text_spool import TextSpool
from rimo_eval.chat.cache import DB_NAME, ResponseCache
from rimo_eval.commands.view.load import Run
from rimo_eval.commands.view.texts import DetailsCursor
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.io.hashing import fingerprint
from rimo_eval.params.config import PredictParams
from rimo_eval.predict import select_sample
from rimo_eval.predictors.cached import Cached, cached_predictions
from rimo_eval.predictors.chat_predictor import ChatPredictor
from rimo_eval.predictors.registry import build_predictor
from rimo_eval.rimo.tracks import TRACK_N, TRACKS
from rimo_eval.run.params import typed_section
from rimo_eval.run.reader import RunReader
from rimo_eval.run.revision import Revision
from rimo_eval.score.stage import score_n, score_p

PENDING = "pending"  # a sample's status in a partial view: no reply in the cache yet


def resolve_partial(reader: RunReader, name: str) -> Revision:
    """RUN as ``rimo-eval compare`` resolves it, or else an experiment of DVC's queue that is
    queued, running or failed (``dvc exp run --queue``, ``--temp``), by its name or stash
    sha: it has no commit of its own before it ends, so its params are those it was queued
    with (its stash commit), and its items are the baseline's."""
    try:
        return reader.resolve(name)
    except ConfigError:
        found = _queued(reader, name)
        if found is None:
            raise
        return found


def _queued(reader: RunReader, name: str) -> Revision | None:
    from dvc.exceptions import DvcException

    try:
        repo = reader.repo
        for queue in (repo.experiments.celery_queue, repo.experiments.tempdir_queue):
            entry = queue.match_queue_entry_by_name(
                [name], queue.iter_queued(), queue.iter_active(),
                queue.iter_failed()).get(name)
            if entry is not None:
                return Revision(name, "queued experiment", entry.stash_rev)
    except DvcException:
        return None
    return None


def load_partial(reader: RunReader, revision: Revision) -> Run:
    """The run at ``revision`` as far as its response cache goes (``Run.partial`` says how
    far). An error names what is missing: no chat backend, no cache, nothing in it yet. (No
    run record: a run in predict has no metrics yet; its files come through the reader.)"""
    root = reader.root
    reader.require(revision, [items_path(t) for t in TRACKS])
    files = reader.files(revision)
    params = files.read_params()
    where = f"params.yaml at {files.where}"
    cfg = typed_section(params, PredictParams, "predict", where)
    if cfg is None:
        raise ConfigError(f"view --partial: {where} has no predict section")
    predictor = build_predictor(cfg)
    if not isinstance(predictor, ChatPredictor):
        raise ConfigError(f"view --partial: {where}: predict.backend is {cfg.backend}, "
                          "which calls no model: nothing of its run is in a response "
                          "cache. `rimo-eval view` shows the run once predict has written "
                          "it")
    cache_dir = _cache_dir(root, predictor, where)
    tables = {t: pq.read_table(files.source(items_path(t))) for t in TRACKS}
    frames = {t: tables[t].to_pandas() for t in TRACKS}  # as score reads them
    all_items = {t: rows_to_items(tables[t].to_pylist()) for t in TRACKS}  # as predict does
    del tables
    sample = {t: select_sample(all_items[t], cfg.limit, cfg.sample_seed) for t in TRACKS}
    requested = [it for t in TRACKS for it in sample[t]]
    # On the project's disk (DVC's own scratch folder), not a tmpfs: the tables hold every
    # reply so far.
    scratch = root / ".dvc" / "tmp"
    tmp = Path(tempfile.mkdtemp(prefix="rimo-view-partial-",
                                dir=scratch if scratch.is_dir() else None))
    try:
        # Each prediction's long texts wait in a spool, as in predict: a k = 64 reasoning
        # run's replies are gigabytes.
        with TextSpool(tmp) as spool:
            cache = ResponseCache(cache_dir, readonly=True)
            try:
                found = cached_predictions(predictor, requested, cache, spool)
            finally:
                cache.close()
            if not found.answered:
                raise DataError(f"view --partial: none of the {found.requests} requests of "
                                f"the run that {where} describes (backend {cfg.backend}) is in "
                                f"the response cache {cache_dir} yet: has its predict "
                                "started, with these params?")
            run = _run(revision, params, frames, sample, predictor, found, tmp)
            # No metrics yet; whether the items are a sample (predict.limit) is known.
            run.metrics = {"sample": {"is_sample": any(
                len(sample[t]) < len(all_items[t]) for t in TRACKS)}}
            return run
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _cache_dir(root: Path, predictor: ChatPredictor[Any], where: str) -> Path:
    """The cache predict writes: the backend's ``cache_dir``; a relative one against the
    project's root (``rimo_eval.io.workspace``: queued runs share the workspace's)."""
    section = f"predict.{predictor.name}.cache_dir"
    value = getattr(predictor.params, "cache_dir", None)
    if value is None:
        raise ConfigError(f"view --partial: {where}: {section} is null: this run keeps no "
                          "response cache, so there is nothing to show before predict ends")
    path = Path(value).expanduser()
    path = path if path.is_absolute() else root / path
    if not (path / DB_NAME).is_file():
        raise DataError(f"view --partial: no response cache at {path} ({section} in {where}): "
                        "has the run's predict sent anything yet?")
    return path


def _run(revision: Revision, params: dict[str, Any],
         frames: dict[str, pd.DataFrame], sample: dict[str, list[Item]],
         predictor: ChatPredictor[Any], found: Cached, tmp: Path) -> Run:
    identity = predictor.identity()
    fp = fingerprint(identity)
    k = predictor.samples
    run = run_id(fp, sample, k)
    preds: dict[str, pd.DataFrame] = {}
    scores: dict[str, pd.DataFrame] = {}
    cursors: dict[str, DetailsCursor] = {}
    try:
        for track in TRACKS:
            path = predictions_path(track, tmp)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_groups(table_groups(track, sample[track], found.predictions, identity, fp,
                                      k, run), table_schema(track, run), path)
            cursors[track] = DetailsCursor(path, track)
            full = pd.read_parquet(path, columns=[c for c in cursors[track].names
                                                  if c not in TEXT_COLUMNS])
            grade = score_n if track == TRACK_N else score_p
            scored = grade(frames[track], full)
            pending = [(track, p, int(s)) in found.pending
                       for p, s in zip(scored["problem_id"], scored["sample"], strict=True)]
            scored.loc[pending, "status"] = PENDING
            mask = [(track, p, int(s)) in found.pending
                    for p, s in zip(full["problem_id"], full["sample"], strict=True)]
            full.loc[mask, "status"] = PENDING
            full.loc[mask, "error"] = None  # not an error: the page says pending
            preds[track] = full.drop(columns=["details"])
            scores[track] = scored
    except BaseException:
        for cursor in cursors.values():
            cursor.close()
        raise
    answered = sum(1 for key in found.predictions if key not in found.pending)
    partial = {"requests": found.requests, "answered": found.answered,
               "samples": len(found.predictions), "samples_answered": answered,
               "at": stored_at(found.newest)}
    return Run(revision=revision, metrics={}, items=frames, predictions=preds, scores=scores,
               judge=None, cursors=cursors, params=params, partial=partial, tmp=tmp,
               model=run_label(predictor.name, predictor.config), k=k)


def stored_at(when: float | None) -> str | None:
    """A cache entry's time as the page shows it: UTC, to the second."""
    if when is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when))


__all__ = ["PENDING", "load_partial", "resolve_partial", "stored_at"]
