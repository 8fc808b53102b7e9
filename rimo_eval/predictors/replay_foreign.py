"""Replies from other tools (and our JSONL's ``reply`` field) graded by RIMO's recipe, and matched
to RIMO items.

Grading: the other tool's score is never read. A RIMO-N reply's prediction is the content of its
last balanced ``\\boxed{}`` (``extract``, as the chat backends read a reply), its reasoning kept
apart; a RIMO-P part's prediction is its reply, stripped (as ``chat_predictor.add_part``).

Matching: a reply's sample id (inspect's ``Sample.id``, lm-eval's ``doc.problem_id``, EEE's
``sample_id``) that is a RIMO id decides; else its problem text, whitespace normalised, equal to
one requested item's. A reply matching neither is an error naming it; so is a log none of whose
replies match (another benchmark's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.items import Item
from rimo_eval.artifacts.predictions import lone_surrogate
from rimo_eval.errors import StageError
from rimo_eval.predictors import extract
from rimo_eval.predictors.foreign import (
    EEE,
    INSPECT,
    LMEVAL,
    Reply,
    Source,
    eee_source,
    lmeval_source,
    read_eee,
    read_lmeval,
)
from rimo_eval.predictors.foreign_inspect import inspect_source, read_inspect
from rimo_eval.rimo.tracks import TRACK_N

_SPACE = re.compile(r"\s+")
SHOWN = 5  # unmatched replies named in an error


@dataclass(frozen=True)
class Replayed:
    """What one replayed (item, sample) becomes: its prediction, details and any error."""

    prediction: str | list[str] | None
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def source_of(path: Path, fmt: str) -> Source:
    return {INSPECT: inspect_source, LMEVAL: lmeval_source, EEE: eee_source}[fmt](path)


def _readers(fmt: str) -> Any:
    return {INSPECT: read_inspect, LMEVAL: read_lmeval, EEE: read_eee}[fmt]


def _part(text: str, reasoning: str | None, finish: str | None) -> dict[str, Any]:
    box = extract.extract_boxed(text)
    details: dict[str, Any] = {"text": text, "finish_reason": finish,
                               "extraction": extract.extraction_kind(box, finish)}
    if reasoning is not None:
        details["reasoning"] = reasoning
    return details


def grade_reply(track: str, texts: list[str], reasoning: Sequence[str | None] = (),
                usage: dict[str, int] | None = None, finish: str | None = None,
                source: str | None = None) -> Replayed:
    """A reply (RIMO-P: one per part) read by RIMO's recipe, as the chat backends read theirs."""
    thoughts = list(reasoning) + [None] * (len(texts) - len(reasoning))
    extra: dict[str, Any] = {}
    if usage:
        extra["usage"] = usage
    if source:
        extra["source"] = source
    if track == TRACK_N:
        details = {**_part(texts[0], thoughts[0], finish), **extra}
        return Replayed(extract.extract_boxed(texts[0]) or "", details)
    parts = [_part(t, r, finish) for t, r in zip(texts, thoughts, strict=True)]
    truncated = any(p["extraction"] == extract.TRUNCATED for p in parts)
    details = {"parts": parts, "extraction": extract.TRUNCATED if truncated else extract.NONE,
               **extra}
    return Replayed([t.strip() for t in texts], details)


def _matcher(items: Sequence[Item], known: frozenset[tuple[str, str]]) -> Any:
    by_text: dict[tuple[str, str], tuple[str, str] | None] = {}
    for it in items:
        key = (it.track, _SPACE.sub(" ", it.problem).strip())
        by_text[key] = None if key in by_text else it.key  # two items, one text: no match

    def match(reply: Reply) -> tuple[str, str] | None:
        if reply.sample_id is not None and (reply.track, reply.sample_id) in known:
            return (reply.track, reply.sample_id)
        if reply.problem is not None:
            return by_text.get((reply.track, _SPACE.sub(" ", reply.problem).strip()))
        return None

    return match


def _shown(replies: list[Reply]) -> str:
    names = ", ".join(f"{r.where} (id {r.sample_id!r})" for r in replies[:SHOWN])
    return names + (f" and {len(replies) - SHOWN} more" if len(replies) > SHOWN else "")


def read_foreign(path: Path, fmt: str, items: Sequence[Item],
                 known: frozenset[tuple[str, str]]
                 ) -> Iterator[tuple[str, str, int, Replayed, str]]:
    """``(track, problem_id, sample, replayed, where)`` of each reply in a file of ``fmt``; the
    whole file is read and matched before anything is yielded (nothing half-imported)."""
    source = source_of(path, fmt)
    match = _matcher(items, known)
    rows, unmatched = [], []
    replies: Iterable[Reply] = _readers(fmt)(path)
    for reply in replies:
        key = match(reply)
        if key is None:
            unmatched.append(reply)
            continue
        label = f"{source.tool} {source.version or '?'}"
        bad = lone_surrogate([*(reply.texts or []), *(t for t in reply.reasoning if t)])
        if bad is not None:
            raise StageError(f"{reply.where}: rule replay.encoding: unpaired UTF-16 surrogate "
                             f"{bad[0]!r} at character {bad[1]}")
        if reply.texts is None:
            replayed = Replayed(None, {"source": label},
                                f"{reply.where}: {reply.error or 'no reply'}")
        else:
            replayed = grade_reply(reply.track, reply.texts, reply.reasoning, reply.usage,
                                   reply.finish_reason, label)
            if reply.prediction is not None:  # its text was made from it: not a reply
                replayed = Replayed(reply.prediction, {
                    k: v for k, v in replayed.details.items() if k not in ("text", "extraction")})
        rows.append((*key, reply.sample, replayed, reply.where))
    if unmatched:
        what = ("none of its replies" if not rows else f"{len(unmatched)} of its replies")
        raise StageError(f"{path}: rule replay.match: {what} match a RIMO item by id or "
                         f"problem text ({_shown(unmatched)}); a log of another benchmark, "
                         f"or of items outside predict.limit's sample?")
    yield from rows


__all__ = ["Replayed", "grade_reply", "read_foreign", "source_of"]
