"""Reading a judge's verdict out of its reply text.

Accepted, in this order: the whole final text as a JSON object; a JSON object inside a fenced
code block; the first ``{...}`` in the text that decodes as a JSON object. Its ``verdict`` must be
``correct`` or ``incorrect`` (case and surrounding space ignored). Anything else is
``unparsable``, which the metrics count as incorrect and report separately.

Only the final answer is read: a leading ``<think>...</think>`` block (reasoning models) is
dropped first, so a verdict the judge merely considered while thinking is never taken.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

VERSION = 1  # bump when what is accepted changes: it is part of the judge fingerprint

CORRECT = "correct"
INCORRECT = "incorrect"
UNPARSABLE = "unparsable"
VERDICTS = (CORRECT, INCORRECT)

_THINK = re.compile(r"\A\s*<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Verdict:
    verdict: str  # correct | incorrect | unparsable
    reason: str
    how: str  # json | fenced | embedded | none: where the object was found


def final_text(raw: str) -> str:
    """The reply without a leading reasoning block (an unclosed one swallows everything)."""
    return _THINK.sub("", raw, count=1).strip()


def _as_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _first_embedded(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start != -1:
        try:
            value, _end = _DECODER.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _verdict(obj: dict[str, Any], how: str) -> Verdict:
    verdict = obj.get("verdict")
    reason = obj.get("reason")
    reason = reason.strip() if isinstance(reason, str) else ""
    word = verdict.strip().lower() if isinstance(verdict, str) else None
    if word in VERDICTS:
        return Verdict(word, reason, how)
    return Verdict(UNPARSABLE, reason, how)


def parse_verdict(raw: str | None) -> Verdict:
    text = final_text(raw or "")
    obj = _as_object(text)
    if obj is not None:
        return _verdict(obj, "json")
    for block in _FENCE.findall(text):
        obj = _as_object(block.strip())
        if obj is not None:
            return _verdict(obj, "fenced")
    obj = _first_embedded(text)
    if obj is not None:
        return _verdict(obj, "embedded")
    return Verdict(UNPARSABLE, "", "none")
