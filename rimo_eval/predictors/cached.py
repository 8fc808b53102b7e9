"""What a chat run has in the response cache so far: its predictions for the samples whose
replies are all stored, ``rimo-eval view --partial``'s data.

It walks the run's protocol as ``predict`` would (the same requests, built by the same
transport, looked up under the same keys; ``predict --estimate`` walks it the same way) and
reads each reply with the engine's own functions, so a sample found whole here is the
prediction the finished run will write for it. It sends nothing and opens the cache read-only:
never a write, never a lock that a running predict would wait on (SQLite's WAL lets a reader
and a writer work at once), and each lookup is its own short read.

RIMO-P part k's prompt holds the model's replies to parts 1..k-1, so part k is found only
after them; a sample still missing a reply is pending, with the parts found so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rimo_eval.artifacts.items import Item
from rimo_eval.artifacts.predictions import STATUS_MISSING, Prediction
from rimo_eval.artifacts.text_spool import TextSpool
from rimo_eval.chat import served
from rimo_eval.chat.cache import ResponseCache
from rimo_eval.chat.session import lookup
from rimo_eval.chat.transport import ChatTransport
from rimo_eval.predictors.chat_predictor import (
    ChatPredictor,
    add_part,
    calls_needed,
    n_prediction,
)
from rimo_eval.predictors.prompting import rimo_n_messages, rimo_p_messages
from rimo_eval.predictors.reply_reading import read_reply, sum_parts
from rimo_eval.rimo.tracks import TRACK_N

PENDING = "pending: not in the response cache yet"
KEYS_PER_QUERY = 500  # SQLite's host-parameter limit is 32766 (999 on old builds)


@dataclass
class Cached:
    """``predictions``: one per (item, sample) asked; a pending one has status ``missing``,
    the error ``PENDING``, and any RIMO-P parts found. ``requests``: what the run sends in
    all; ``answered``: those found; ``newest``: when the newest of them was stored (unix
    time; None when none was)."""

    predictions: dict[tuple[str, str, int], Prediction]
    pending: set[tuple[str, str, int]]
    requests: int
    answered: int = 0
    newest: float | None = None
    keys: list[str] = field(default_factory=list)


def cached_predictions(predictor: ChatPredictor[Any], items: Sequence[Item],
                       cache: ResponseCache, spool: TextSpool | None = None) -> Cached:
    """``spool``: where each prediction's long texts wait for the table (as in predict)."""
    transport = predictor.offline_transport()
    out = Cached({}, set(), calls_needed(items, predictor.samples))
    identity = served.recorded(cache, transport)  # the weights the run's keys name
    for item in items:
        for sample in range(predictor.samples):
            pred = _one(predictor, transport, cache, item, sample, out, identity)
            pred.sample = sample
            if spool is not None:
                spool.park(pred)
            out.predictions[pred.sample_key] = pred
            if pred.status == STATUS_MISSING:
                out.pending.add(pred.sample_key)
    out.newest = _newest(cache, out.keys)
    return out


def _one(predictor: ChatPredictor[Any], transport: ChatTransport, cache: ResponseCache,
         item: Item, sample: int, out: Cached, identity: served.Identity) -> Prediction:
    system, think = predictor.params.system_prompt, predictor.think_split()
    if item.track == TRACK_N:
        key, _, _, reply = lookup(cache, transport, rimo_n_messages(item, system), sample,
                                  identity)
        if reply is None:
            return Prediction(item.track, item.problem_id, None, STATUS_MISSING, PENDING)
        out.answered += 1
        out.keys.append(key)
        return n_prediction(item, read_reply(reply, key, think))
    proved: list[str] = []
    parts: list[dict[str, Any]] = []
    for index in range(len(item.sub_problems)):
        key, _, _, reply = lookup(cache, transport,
                                  rimo_p_messages(item, index, proved, system), sample,
                                  identity)
        if reply is None:
            return Prediction(item.track, item.problem_id, proved or None, STATUS_MISSING,
                              PENDING, sum_parts(parts, len(parts)) if parts else {})
        out.answered += 1
        out.keys.append(key)
        add_part(read_reply(reply, key, think), proved, parts)
    return Prediction(item.track, item.problem_id, proved,
                      details=sum_parts(parts, len(item.sub_problems)))


def _newest(cache: ResponseCache, keys: list[str]) -> float | None:
    """When the newest of ``keys`` was stored: a fact of the cache's contents (not of the
    clock of this call), so the same contents give the same page."""
    conn = cache.connection()
    if conn is None or not keys:
        return None
    newest: float | None = None
    with cache.guard():
        for start in range(0, len(keys), KEYS_PER_QUERY):
            chunk = keys[start:start + KEYS_PER_QUERY]
            row = conn.execute("SELECT max(created) FROM entries WHERE key IN "
                               f"({','.join('?' * len(chunk))})", chunk).fetchone()
            if row and row[0] is not None:
                newest = row[0] if newest is None else max(newest, row[0])
    return newest


__all__ = ["PENDING", "Cached", "cached_predictions"]
