"""Stage predict: run the configured backend over the (optionally sampled) items."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from stages.core.errors import StageError
from stages.core.hashing import fingerprint, sha256_bytes
from stages.core.items import ITEMS_DIR, Item, load_items
from stages.core.predictions import (
    PREDICTIONS_DIR,
    STATUS_ERROR,
    STATUS_MISSING,
    STATUSES,
    build_table,
    predictions_path,
    write_table,
)
from stages.core.tracks import TRACK_N, TRACK_P, TRACKS
from stages.predictors import Prediction, Predictor, create_predictor
from stages.predictors.error_budget import allowed_share, check_error_budget


def select_sample(items: Sequence[Item], limit: int | None, seed: int) -> list[Item]:
    """The first ``limit`` items of one track in a seeded hash order: stable and spread out.

    Hashing (seed, track, id) rather than shuffling means a larger limit extends a smaller one.
    """
    if limit is None:
        return list(items)
    if not isinstance(limit, int) or limit < 0:
        raise StageError(f"params.yaml: predict.limit must be null or an integer >= 0, "
                         f"got {limit!r}")

    def rank(it: Item) -> str:
        return sha256_bytes(f"{seed}:{it.track}:{it.problem_id}".encode())

    return sorted(items, key=rank)[:limit]


def _check_prediction(pred: Prediction, item: Item) -> None:
    if pred.status not in STATUSES:
        raise StageError(f"{item.track} {item.problem_id}: unknown prediction status "
                         f"{pred.status!r}")
    value = pred.prediction
    if value is None:
        return
    if item.track == TRACK_N and not isinstance(value, str):
        raise StageError(f"{item.track} {item.problem_id}: prediction must be a string, "
                         f"got {type(value).__name__}")
    if item.track == TRACK_P and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise StageError(f"{item.track} {item.problem_id}: prediction must be a list of strings")


def _encodable(value: str | list[str] | None) -> bool:
    texts = [value] if isinstance(value, str) else value or []
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unicode_safe(pred: Prediction) -> Prediction:
    """A model reply with a lone surrogate cannot be stored; record it as that item's error
    rather than failing the whole run after every request was made."""
    if _encodable(pred.prediction):
        return pred
    return Prediction(pred.track, pred.problem_id, None, status=STATUS_ERROR,
                      error="prediction is not valid Unicode (lone surrogate)")


def collect(preds: Iterable[Prediction], items: Sequence[Item], backend: str
            ) -> dict[tuple[str, str], Prediction]:
    """Exactly one prediction per requested item; an item the backend skipped is 'missing'."""
    wanted = {it.key: it for it in items}
    out: dict[tuple[str, str], Prediction] = {}
    for pred in preds:
        item = wanted.get(pred.key)
        if item is None:
            raise StageError(f"backend {backend}: prediction for an item not requested: "
                             f"{pred.track} {pred.problem_id}")
        if pred.key in out:
            raise StageError(f"backend {backend}: two predictions for {pred.track} "
                             f"{pred.problem_id}")
        _check_prediction(pred, item)
        out[pred.key] = _unicode_safe(pred)
    for key in wanted.keys() - out.keys():
        out[key] = Prediction(key[0], key[1], None, status=STATUS_MISSING,
                              error="no prediction from backend")
    return out


def predict(cfg: dict[str, Any], items_dir: Path = ITEMS_DIR,
            out_dir: Path = PREDICTIONS_DIR) -> dict[str, Any]:
    backend = cfg.get("backend")
    if not isinstance(backend, str):
        raise StageError("params.yaml: predict.backend must name a backend")
    predictor: Predictor = create_predictor(backend, cfg.get(backend))
    allow_errors = allowed_share(cfg)
    all_items = {track: load_items(track, items_dir) for track in TRACKS}
    predictor.known_keys = frozenset(it.key for its in all_items.values() for it in its)
    seed = cfg.get("sample_seed", 0)
    sample = {t: select_sample(its, cfg.get("limit"), seed) for t, its in all_items.items()}
    requested = [it for track in TRACKS for it in sample[track]]
    identity = predictor.identity()
    fp = fingerprint(identity)
    print(f"predict: backend {backend} (fingerprint {fp[:12]}) on "
          + ", ".join(f"{len(sample[t])}/{len(all_items[t])} {t}" for t in TRACKS),
          file=sys.stderr)
    preds = collect(predictor.predict(requested), requested, backend)
    errors = check_error_budget(preds.values(), allow_errors)
    tables = {t: build_table(t, sample[t], preds, identity, fp) for t in TRACKS}
    # Publish only once both tables are built, so a failure leaves the old pair intact.
    for track, table in tables.items():
        write_table(table, predictions_path(track, out_dir))
    counts = {t: {s: sum(1 for it in sample[t] if preds[it.key].status == s) for s in STATUSES}
              for t in TRACKS}
    print(f"predict: wrote {os.fspath(out_dir)} {counts}", file=sys.stderr)
    return {"fingerprint": fp, "counts": counts, "errors": errors}


def run(params: dict[str, Any]) -> None:
    predict(params["predict"])
