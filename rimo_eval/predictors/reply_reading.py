"""How the engine reads a reply: reasoning kept apart from the answer text, the extraction
status, usage per request and summed over a RIMO-P sample's parts.

Reasoning is the server's reasoning field (``reasoning_content`` / ``reasoning``) plus any
leading think block of the content (``think_split``); only the rest is ever searched for an
answer. A reply whose last box is empty is ``"empty_box"``; one with no box is ``"truncated"``
when the server cut it off (``finish_reason: length``), else ``"none"``. Everything here is a
pure function of the (cached) reply, so a re-run over a warm cache writes byte-identical
details.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rimo_eval.chat.reasoning import split_reply
from rimo_eval.chat.transport import ChatReply
from rimo_eval.params.chat import ThinkSplit
from rimo_eval.predictors import extract

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "reasoning_tokens")
# Prompt-cache tokens (Anthropic's cache read / write, Gemini's cached content), counted inside
# prompt_tokens; recorded only when the server reports some, so other backends' details keep
# their shape.
CACHE_USAGE_KEYS = ("cache_read_tokens", "cache_write_tokens")


def _usage(usage: dict[str, int]) -> dict[str, int]:
    out = {k: int(usage.get(k, 0)) for k in USAGE_KEYS}
    out.update({k: int(usage[k]) for k in CACHE_USAGE_KEYS if usage.get(k)})
    return out


@dataclass
class Answer:
    """One reply read as the engine uses it: reasoning apart, the answer text alone."""

    details: dict[str, Any]
    text: str


def read_reply(reply: ChatReply, key: str, think: ThinkSplit | None) -> Answer:
    """The details of one request (``key``: its cache key) and the text to extract from."""
    content = reply.texts[0]
    reasoning, text = split_reply(reply, think)
    finish = reply.finish_reasons[0]
    box = extract.extract_boxed(text)
    extraction = extract.extraction_kind(box, finish)
    details = {"request_sha256": key, "raw_text": content, "text": text,
               "reasoning": reasoning, "finish_reason": finish, "extraction": extraction,
               "usage": _usage(reply.usage),
               "requests": 1, "model": reply.model,
               # What the engine did to the reply on its way in (unicode_repaired, redacted):
               # score's diagnostic flags. Absent when nothing was, so details keep their shape.
               **dict.fromkeys(reply.flags, True)}
    # Latency is kept with the reply in the cache entry named by request_sha256, not here:
    # wall-clock time would make the predictions differ byte-wise between identical runs.
    return Answer(details, text)


def sum_parts(parts: list[dict[str, Any]], requests: int) -> dict[str, Any]:
    """A RIMO-P sample's details: its parts, and their usage summed."""
    usage = {k: sum(p["usage"][k] for p in parts) for k in USAGE_KEYS}
    usage.update({k: sum(p["usage"].get(k, 0) for p in parts) for k in CACHE_USAGE_KEYS
                  if any(k in p["usage"] for p in parts)})
    truncated = any(p["extraction"] == "truncated" for p in parts)
    return {"parts": parts, "usage": usage, "requests": requests,
            "finish_reason": parts[-1]["finish_reason"] if parts else None,
            "extraction": "truncated" if truncated else "none"}
