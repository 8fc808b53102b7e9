"""Stage predict: run the configured backend over the (optionally sampled) items.

Besides the predictions tables it writes ``reports/predict_run.json``: what this run did
(requests sent, replies served from the cache, wall time). Those facts differ between identical
runs, so they live there and never in the tables or in ``metrics.json``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.items import ITEMS_DIR, Item, load_items
from rimo_eval.artifacts.paths import PREDICT_RUN_PATH
from rimo_eval.artifacts.predictions import (
    PREDICTIONS_DIR,
    STATUS_MISSING,
    STATUSES,
    lone_surrogate,
    predictions_path,
    run_id,
    table_groups,
    table_schema,
    write_groups,
)
from rimo_eval.artifacts.text_spool import TextSpool
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.io.atomic import atomic_path, write_json
from rimo_eval.io.hashing import fingerprint, sha256_bytes
from rimo_eval.params import head as params_head
from rimo_eval.params.config import Params, PredictParams, read_yaml
from rimo_eval.params.prices import applied_price
from rimo_eval.predictors import Prediction, Predictor
from rimo_eval.predictors.chat_predictor import ChatPredictor
from rimo_eval.predictors.error_budget import check_error_budget
from rimo_eval.predictors.registry import build_predictor
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS


def select_sample(items: Sequence[Item], limit: int | None, seed: int) -> list[Item]:
    """The first ``limit`` items of one track in a seeded hash order: stable and spread out.

    Hashing (seed, track, id) rather than shuffling means a larger limit extends a smaller one.
    """
    if limit is None:
        return list(items)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ConfigError(f"params.yaml: predict.limit must be null or an integer >= 0, "
                         f"got {limit!r}")

    def rank(it: Item) -> str:
        return sha256_bytes(f"{seed}:{it.track}:{it.problem_id}".encode())

    return sorted(items, key=rank)[:limit]


def _check_prediction(pred: Prediction, item: Item) -> None:
    if pred.status not in STATUSES:
        raise DataError(f"{item.track} {item.problem_id}: unknown prediction status "
                         f"{pred.status!r}")
    value = pred.prediction
    if value is None:
        return
    if item.track == TRACK_N and not isinstance(value, str):
        raise DataError(f"{item.track} {item.problem_id}: prediction must be a string, "
                         f"got {type(value).__name__}")
    if item.track == TRACK_P and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise DataError(f"{item.track} {item.problem_id}: prediction must be a list of strings")
    # The chat engine makes model text valid where it enters (rimo_eval.chat.transport.ChatReply)
    # and replay refuses a file holding a lone surrogate, naming its line; a backend that still
    # returns one breaks the Predictor contract, like one returning a number.
    bad = lone_surrogate(value)
    if bad is not None:
        raise DataError(f"{item.track} {item.problem_id}: prediction is not valid Unicode (a "
                        f"lone surrogate U+{ord(bad[0]):04X} at index {bad[1]})")


def collect(preds: Iterable[Prediction], items: Sequence[Item], backend: str, samples: int = 1,
            spool: TextSpool | None = None) -> dict[tuple[str, str, int], Prediction]:
    """Exactly one prediction per requested (item, sample); one the backend skipped is
    'missing'. With a ``spool``, each one's long texts wait there for the table."""
    wanted = {it.key: it for it in items}
    out: dict[tuple[str, str, int], Prediction] = {}
    for pred in preds:
        item = wanted.get(pred.key)
        if item is None:
            raise DataError(f"backend {backend}: prediction for an item not requested: "
                             f"{pred.track} {pred.problem_id}")
        if isinstance(pred.sample, bool) or not isinstance(pred.sample, int) \
                or not 0 <= pred.sample < samples:
            raise DataError(f"backend {backend}: {pred.track} {pred.problem_id}: sample "
                             f"{pred.sample!r} outside 0..{samples - 1} (predict.samples)")
        if pred.sample_key in out:
            raise DataError(f"backend {backend}: two predictions for {pred.track} "
                             f"{pred.problem_id} sample {pred.sample}")
        _check_prediction(pred, item)
        if spool is not None:
            spool.park(pred)
        out[pred.sample_key] = pred
    for key in sorted({(*k, j) for k in wanted for j in range(samples)} - out.keys()):
        out[key] = Prediction(key[0], key[1], None, status=STATUS_MISSING,
                              error="no prediction from backend", sample=key[2])
    return out


def _setup(params: PredictParams, items_dir: Path
           ) -> tuple[str, Predictor, dict[str, list[Item]], dict[str, list[Item]]]:
    backend = params.backend
    predictor = build_predictor(params)
    all_items = {track: load_items(track, items_dir) for track in TRACKS}
    predictor.known_keys = frozenset(it.key for its in all_items.values() for it in its)
    sample = {t: select_sample(its, params.limit, params.sample_seed)
              for t, its in all_items.items()}
    return backend, predictor, all_items, sample


def what_runs(backend: str, all_items: dict[str, list[Item]], sample: dict[str, list[Item]],
              k: int) -> str:
    """What this run evaluates, in the words the README uses: items, k, backend."""
    return (f"{sum(len(s) for s in sample.values())} items ("
            + ", ".join(f"{len(sample[t])}/{len(all_items[t])} {t}" for t in TRACKS)
            + f"), k = {k}, backend {backend}")


def drift_warning(params_path: Path | None, command: str) -> str | None:
    """A warning when backend, limit or samples are not the committed params file's."""
    if params_path is None:
        return None
    return params_head.drift_warning(command, params_path, read_yaml(params_path))


def estimate(cfg: PredictParams, items_dir: Path = ITEMS_DIR,
             params_path: Path | None = None) -> str:
    """``rimo-eval predict --estimate``: requests, cache hits, prompt tokens. Sends nothing,
    writes nothing."""
    from rimo_eval.predictors.estimate import estimate as chat_estimate
    from rimo_eval.predictors.estimate import render

    backend, predictor, all_items, sample = _setup(cfg, items_dir)
    head = f"predict --estimate: {what_runs(backend, all_items, sample, predictor.samples)}"
    warning = drift_warning(params_path, "predict --estimate")
    if warning:
        head += f"\n{warning}"
    if not isinstance(predictor, ChatPredictor):
        return f"{head}\n  backend {backend} calls no model: 0 requests"
    requested = [it for track in TRACKS for it in sample[track]]
    est = chat_estimate(predictor, requested)
    priced = applied_price(getattr(predictor.params, "price_per_mtok", None),
                           getattr(predictor.params, "batch", None))
    return f"{head}\n{render(est, priced)}"


def batch_admin(params: PredictParams, cancel: bool = False) -> str:
    """``--batch-status`` / ``--batch-cancel`` (rimo_eval.chat.batch.admin): the anthropic
    section's batches when ``predict.backend`` is anthropic, else the openai section's."""
    from rimo_eval.chat.batch.admin import batch_admin as admin

    section = "anthropic" if params.backend == "anthropic" else "openai"
    return admin(getattr(params, section), f"predict.{section}", cancel=cancel)


def batch_file(cfg: PredictParams, path: Path, export: bool,
               items_dir: Path = ITEMS_DIR) -> str:
    """``--export-batch FILE`` / ``--import-batch FILE`` (rimo_eval.predictors.batch_files)."""
    from rimo_eval.predictors.batch_files import export_batch, import_batch

    backend, predictor, _, sample = _setup(cfg, items_dir)
    if not isinstance(predictor, ChatPredictor) or backend == "local":
        raise ConfigError(f"params.yaml: predict.backend is {backend}; batch files are for "
                          "the openai backend")
    requested = [it for track in TRACKS for it in sample[track]]
    return (export_batch if export else import_batch)(predictor, requested, Path(path))


def predict(params: PredictParams, items_dir: Path = ITEMS_DIR,
            out_dir: Path = PREDICTIONS_DIR, run_path: Path | None = None,
            params_path: Path | None = None) -> dict[str, Any]:
    backend, predictor, all_items, sample = _setup(params, items_dir)
    requested = [it for track in TRACKS for it in sample[track]]
    k = predictor.samples
    identity = predictor.identity()
    fp = fingerprint(identity)
    print(f"predict: {what_runs(backend, all_items, sample, k)} (fingerprint {fp[:12]})",
          file=sys.stderr)
    warning = drift_warning(params_path, "predict")
    if warning:
        print(warning, file=sys.stderr)
    # Beside the outputs (their disk, not a tmpfs), not in them: a failed run leaves no folder.
    with TextSpool(out_dir.parent) as spool:
        predictor.spool = spool
        try:
            return _run(params, predictor, sample, requested, identity, fp, out_dir,
                        run_path)
        finally:
            predictor.spool = None


def _run(params: PredictParams, predictor: Predictor, sample: dict[str, list[Item]],
         requested: list[Item], identity: dict[str, Any], fp: str, out_dir: Path,
         run_path: Path | None) -> dict[str, Any]:
    backend, k = params.backend, predictor.samples
    started = time.monotonic()
    preds = collect(predictor.predict(requested), requested, backend, k, predictor.spool)
    wall_s = time.monotonic() - started
    # Too many failed requests fail the stage here, before anything is written.
    errors = check_error_budget(preds.values(), params.allow_errors,
                                "item samples" if k > 1 else "items")
    run = run_id(fp, sample, k)
    # Each table is built and written a row group at a time (bounded memory) into a temporary
    # file; both are published only once both are whole, so a failure before here leaves the
    # old pair. Two renames are not one: a kill between them leaves a mixed pair (RIMO-N is
    # renamed first), which score refuses because the run ids differ.
    with contextlib.ExitStack() as stack:
        tmps = {t: stack.enter_context(atomic_path(predictions_path(t, out_dir)))
                for t in reversed(TRACKS)}  # exits in reverse: RIMO-N's rename first
        for track in TRACKS:
            write_groups(table_groups(track, sample[track], preds, identity, fp, k, run),
                         table_schema(track, run), tmps[track])
    counts = {t: {s: sum(1 for key, p in preds.items() if key[0] == t and p.status == s)
                  for s in STATUSES} for t in TRACKS}
    print(f"predict: wrote {os.fspath(out_dir)} {counts}", file=sys.stderr)
    run_facts = run_record(backend, fp, predictor, sample, wall_s)
    if run_path is not None:
        write_json(run_path, run_facts)
    return {"fingerprint": fp, "run_id": run, "counts": counts, "errors": errors,
            "run": run_facts}


def run_record(backend: str, fp: str, predictor: Predictor, sample: dict[str, list[Item]],
               wall_s: float) -> dict[str, Any]:
    """``reports/predict_run.json``: per track and in all, requests sent to the model and
    replies served from the response cache; a backend without a model sends none."""
    stats = getattr(predictor, "run_stats", None) or {}
    tracks = {t: {"items": len(sample[t]), "samples": predictor.samples,
                  "requests_sent": 0, "cached_replies": 0,
                  **(stats.get("tracks") or {}).get(t, {})} for t in TRACKS}
    return {"backend": backend, "fingerprint": fp, "samples": predictor.samples,
            "wall_s": round(wall_s, 3),
            "requests_sent": sum(v["requests_sent"] for v in tracks.values()),
            "cached_replies": sum(v["cached_replies"] for v in tracks.values()),
            **tracks}


def run(params: Params) -> None:
    predict(params.predict, run_path=PREDICT_RUN_PATH, params_path=params.path)
