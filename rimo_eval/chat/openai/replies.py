"""What an OpenAI-compatible server's answers mean: a chat completion's JSON body read into a
``ChatReply`` (reasoning fields included), and the 400s that are not transient: a prompt over
the context window (that item's ``error_kind: context_length``) and a request parameter the
server rejects (named with its params key, so the stage can stop once instead of failing every
item). Pure functions of the body or the exception; the transport is ``transport.py`` beside
this module.
"""

from __future__ import annotations

import re
from typing import Any

from rimo_eval.chat.errors import HTTPStatusError, MalformedResponse
from rimo_eval.chat.transport import ChatReply, int_usage

# Sampling parameters sent only when not null (the server's default otherwise).
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "max_completion_tokens",
                 "reasoning_effort", "seed")
_CONTEXT = re.compile(r"context[ _]length|context window|maximum context|too many tokens"
                      r"|prompt is too long|exceeds the model", re.IGNORECASE)
_BAD_PARAM = re.compile(r"unsupported (parameter|value)|unrecognized request argument"
                        r"|extra inputs are not permitted|unknown parameter"
                        r"|not supported with this model|does not support", re.IGNORECASE)


def context_length_error(exc: HTTPStatusError) -> bool:
    return exc.status in (400, 413, 422) and (
        exc.code == "context_length_exceeded" or bool(_CONTEXT.search(exc.message)))


def rejected_parameter(exc: HTTPStatusError, request: dict[str, Any]) -> str | None:
    """The request parameter a 400/422 rejects, or ``None`` when it names none we sent."""
    if exc.status not in (400, 422) or context_length_error(exc):
        return None
    sent = {k for k in request if k not in ("messages", "model", "extra_body")}
    sent |= set(request.get("extra_body") or {})
    param: str | None = exc.param
    if param is not None and param in sent:
        return param
    message = exc.message
    if not _BAD_PARAM.search(message):
        return None
    named = [k for k in sorted(sent, key=len, reverse=True)
             if re.search(rf"(?<![\w.]){re.escape(k)}(?![\w])", message)]
    return named[0] if named else (param or "(unnamed)")


def params_key(param: str, request: dict[str, Any], section: str) -> str:
    """The key under ``section`` (``predict.openai``, ``judge``) that sets ``param``."""
    if param in (request.get("extra_body") or {}):
        return f"{section}.extra_body.{param}"
    return f"{section}.{param}" if param in SAMPLING_KEYS else f"{section}.extra_body"


def parse_completion(data: Any, latency_s: float) -> ChatReply:
    """A chat completion's JSON body, checked field by field (what the client's models did)."""
    try:
        choices = sorted(data.get("choices") or [], key=lambda c: c.get("index") or 0)
        texts = [c["message"].get("content") or "" for c in choices]
        # vLLM and SGLang (reasoning parsers), DeepSeek: reasoning_content; OpenRouter: reasoning
        reasoning = [_text(c["message"].get("reasoning_content"))
                     or _text(c["message"].get("reasoning")) for c in choices]
        finish = [c.get("finish_reason") for c in choices]
        usage = data.get("usage") or {}
        model = data.get("model")
        ok = (all(isinstance(t, str) for t in texts) and isinstance(usage, dict)
              and all(f is None or isinstance(f, str) for f in finish)
              and (model is None or isinstance(model, str)))
    except (AttributeError, KeyError, TypeError) as exc:
        raise MalformedResponse(f"unexpected response shape: {exc!r}") from None
    if not ok:
        raise MalformedResponse("unexpected response shape: a field has the wrong type")
    if not texts:
        raise MalformedResponse("the response has no choices")
    return ChatReply(texts, finish, int_usage(usage), model, latency_s, reasoning)


def _text(value: Any) -> str | None:
    # A reasoning field that is absent, empty or not a string is no reasoning.
    return value if isinstance(value, str) and value else None
