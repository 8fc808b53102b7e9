"""A fake Anthropic Messages API on 127.0.0.1 that the official ``anthropic`` SDK talks to.

``POST /v1/messages`` (https://platform.claude.com/docs/en/api/messages). The key is read from
``x-api-key`` or from ``Authorization: Bearer`` (anthropic 2.16.0 sends the latter, API version
2026-10-21: https://platform.claude.com/docs/en/api/migration-2026-10-21). Directives, on top of
those of ``fake_provider`` (whose ``[[fail:CODE:K]]`` answers in Anthropic's error shape, 529
as ``overloaded_error``, https://platform.claude.com/docs/en/api/errors):

``[[gold:X]]``          the answer text ends in ``\\boxed{X}``
``[[thinking:X]]``      a ``thinking`` block (holding ``\\boxed{X}``, with a ``signature``)
                        before the text, when the request enables ``thinking``; a
                        ``redacted_thinking`` block too with ``[[thinking:X:redacted]]``
``[[decoy:X]]``         the *text* block opens with ``<think>…\\boxed{X}…</think>``: answer text
``[[truncate]]``        ``stop_reason: max_tokens`` and a reply with no box;
                        ``[[truncate:thinking]]``: the budget ran out while thinking, so
                        there is no text block at all
``[[refusal]]``         ``stop_reason: refusal`` with no text
``[[empty:K]]``         the first K attempts: ``content: []``
``[[cached:R:W]]``      usage reports R cache-read and W cache-write input tokens
``[[by_arrival:A,...]]`` the gold is entry ``n % len`` for the n-th arrival (0-based) of this
                        exact body: k identical requests get k different samples, as the real
                        API samples them (it takes no seed)
``[[reject:PARAM]]``    HTTP 400 ``invalid_request_error`` naming ``PARAM``
``[[spend_limit]]``     HTTP 429 ``rate_limit_error`` with ``error.details.error_code:
                        enforced_spend_limit_reached`` and no ``Retry-After`` (a monthly cap)

As the API does, with ``anthropic-version: 2026-10-21`` a ``temperature``, ``top_p`` or
``top_k`` in the body is a 400 naming it (the migration guide above), and ``thinking`` with
``type: enabled`` needs ``1024 <= budget_tokens < max_tokens`` (400 naming
``thinking.budget_tokens``; https://platform.claude.com/docs/en/build-with-claude/extended-thinking).
Token counts are word counts. Usage carries ``input_tokens``, ``output_tokens`` (thinking
included), ``cache_creation_input_tokens``, ``cache_read_input_tokens`` and
``output_tokens_details.thinking_tokens`` (the Usage object of the Messages API).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tests.support.fake_provider import FakeProvider, Record, Reply, serve_main
from tests.support.loopback import first_k

# https://platform.claude.com/docs/en/api/errors: HTTP status -> error.type
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               402: "billing_error", 403: "permission_error", 404: "not_found_error",
               413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               504: "timeout_error", 529: "overloaded_error"}
SAMPLING = ("temperature", "top_p", "top_k")
NEW_API = "2026-10-21"


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):  # content blocks
        return sum(_words(b.get("text", "")) for b in value if isinstance(b, dict))
    return 0


@dataclass
class FakeAnthropic(FakeProvider):
    def routes(self, path: str) -> bool:
        return path == "/v1/messages"

    def prompt_of(self, body: dict[str, Any]) -> str:
        users = [m.get("content") for m in body.get("messages") or []
                 if isinstance(m, dict) and m.get("role") == "user"]
        last = users[-1] if users else ""
        if isinstance(last, list):
            return " ".join(b.get("text", "") for b in last if isinstance(b, dict))
        return last if isinstance(last, str) else ""

    def api_key_of(self, headers: dict[str, str], query: dict[str, list[str]]) -> str | None:
        if headers.get("x-api-key"):
            return headers["x-api-key"]
        scheme, _, token = headers.get("authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" and token else None

    def error(self, status: int, message: str, **extra: Any) -> Reply:
        kind = ERROR_TYPES.get(status, "api_error")
        if status == 529:
            message = "Overloaded"
        return Reply(status, {"type": "error", "error": {"type": kind, "message": message},
                              "request_id": "req_fake"})

    def auth_error(self, record: Record) -> Reply:
        return self.error(401, "invalid x-api-key")

    def _rejection(self, record: Record) -> Reply | None:
        body, d = record.body, record.directives
        if "spend_limit" in d:
            reply = self.error(429, "You have reached your monthly usage limit.")
            reply.body["error"]["details"] = {  # type: ignore[index]
                "error_code": "enforced_spend_limit_reached"}
            return reply
        if "reject" in d:
            return self.error(400, f"{d['reject']}: Extra inputs are not permitted")
        if record.headers.get("anthropic-version") == NEW_API:
            for name in SAMPLING:
                if name in body:
                    return self.error(400, f"`{name}` is deprecated for this model.")
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or not 1024 <= budget < int(body["max_tokens"]):
                return self.error(400, "thinking.budget_tokens: Input should be greater than "
                                  "or equal to 1024 and less than max_tokens")
        return None

    def answer(self, record: Record, text: str) -> Reply:
        rejection = self._rejection(record)
        if rejection is not None:
            return rejection
        body, d = record.body, record.directives
        if "by_arrival" in d:
            golds = d["by_arrival"].split(",")
            gold = golds[(record.attempt - 1) % len(golds)]
            text = f"Working through it carefully, the answer is \\boxed{{{gold}}}."
        stop, blocks = "end_turn", []
        thinking_on = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
        thought = ""
        if "thinking" in d and thinking_on:
            guess, _, redacted = d["thinking"].partition(":")
            thought = f"Perhaps \\boxed{{{guess}}}. No: recount the cases."
            blocks.append({"type": "thinking", "thinking": thought,
                           "signature": hashlib.sha256(thought.encode()).hexdigest()})
            if redacted:
                blocks.append({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"})
        if "decoy" in d:
            text = (f"<think>\nMaybe \\boxed{{{d['decoy']}}}? Check again.\n</think>\n\n"
                    f"{text}")
        if "truncate" in d:
            text, stop = "Let me start by considering the case n = 1, then", "max_tokens"
            if d["truncate"] == "thinking":
                text = ""
        outcome = "ok"
        if "refusal" in d:
            text, stop = "", "refusal"
        if "empty" in d and first_k(d["empty"], record.attempt):
            blocks, text, outcome = [], "", "empty"
        if text:
            blocks.append({"type": "text", "text": text})
        read, _, write = d.get("cached", "0:0").partition(":")
        system_words = _words(body.get("system"))
        prompt_words = sum(_words(m.get("content")) for m in body.get("messages") or [])
        thinking_tokens = _words(thought)
        usage = {"input_tokens": prompt_words + system_words,
                 "output_tokens": _words(text) + thinking_tokens,
                 "cache_creation_input_tokens": int(write or 0),
                 "cache_read_input_tokens": int(read or 0),
                 "output_tokens_details": {"thinking_tokens": thinking_tokens},
                 "service_tier": "standard"}
        return Reply(200, {"id": f"msg_{record.key[:16]}", "type": "message",
                           "role": "assistant", "model": body.get("model", "fake"),
                           "content": blocks, "stop_reason": stop, "stop_sequence": None,
                           "usage": usage}, outcome=outcome, text=text)


if __name__ == "__main__":
    serve_main(FakeAnthropic)
