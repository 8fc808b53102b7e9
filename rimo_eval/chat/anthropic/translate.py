"""Anthropic Messages API <-> plain data: the pure half of ``predict.backend: anthropic``.

Design note (issue 22; the transport is ``transport.py`` beside this, over
``rimo_eval.chat.native``):

- How it plugs in. The transport (``transport.py``, a ``ChatTransport``) holds one
  ``anthropic.AsyncAnthropic(api_key=...,
  base_url=..., max_retries=0, timeout=httpx2.Timeout(timeout_s, connect=10))`` and does
  ``request(messages, sample) -> create_kwargs(params, messages)`` (the cache key hashes that
  dict, plus the sample index: the API takes no seed, so k samples are k identical requests),
  ``send -> parse_message(await client.messages.create(**kwargs))``, and on an exception
  ``classify_error(exc, kwargs)``, mapping its ``action`` onto the engine's errors: ``retry``
  (with ``retry_after_s`` as the floor of the backoff), ``fatal`` (the stage stops),
  ``parameter`` (the stage stops naming ``params_key``), ``item`` (that item's error, with
  ``kind``). A parsed reply with ``error_kind`` set is that item's error (``retryable``: retry
  it first). ``max_retries=0``: the engine owns retries, so that the circuit breaker and the
  progress bar see them. An explicit ``timeout`` is needed as well: with the SDK's default one,
  a non-streamed ``max_tokens`` above 21,333 is refused client-side ("Streaming is required").
- How decisions reach the engine (``rimo_eval.chat.native``): each becomes the engine's own error
  (``errors.error_for``: ``ProviderStatusError`` for a status, ``ConnectionFailed`` /
  ``RequestTimeout`` / ``MalformedResponse`` by ``cause``) with the decision attached, which
  ``retrying`` honours; ``fatal`` and ``parameter`` are ``StageError``, ``item`` is
  ``TransportError(message, kind)`` (``RetryingTransport.final_error``); messages go through
  ``rimo_eval.chat.redact`` first.
- Message Batches (``predict.anthropic.batch``): ``rimo_eval.chat.batch.anthropic`` sends these
  same ``create_kwargs`` as each request's ``params`` and reads a result with ``parse_message``
  (``succeeded``) or ``classify_result_error`` (``errored``: ``classify_status``, as online).
- API version. anthropic 2.16.0 sends ``anthropic-version: 2026-10-21``, under which
  ``temperature``, ``top_p`` and ``top_k`` are a 400 even at their defaults
  (https://platform.claude.com/docs/en/api/migration-2026-10-21). They default to ``null``
  here and go out (in ``extra_body``: the SDK has no argument for them) only when set, with
  ``api_version: "2023-06-01"`` for models that still take them; set on 2026-10-21 they stop
  the stage naming the params key instead of failing every item.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rimo_eval.chat.errors import ErrorDecision, retry_after_s, retryable_status
from rimo_eval.chat.messages import split_system
from rimo_eval.params.chat import AnthropicParams

PARAMS_SECTION = "predict.anthropic"

# stop_reason -> the engine's finish reasons (those of OpenAI chat completions: "stop",
# "length", "content_filter", "tool_calls"), from the Message object's stop_reason
# (https://platform.claude.com/docs/en/api/messages#response-stop-reason). "length" is what
# makes a reply without a box ``extraction: truncated``.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "tool_use": "tool_calls",
    "pause_turn": "pause_turn",
}


def create_kwargs(params: AnthropicParams,
                  messages: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """The keyword arguments of ``client.messages.create`` for chat ``messages``, from the
    typed section (its defaults are the keys left out; ``None`` is "not sent": the API's
    default; ``max_tokens`` is required by the API,
    https://platform.claude.com/docs/en/api/messages).

    ``messages`` are ``{"role": "system"|"user"|"assistant", "content": str}``. System
    messages, after ``system_prompt``, become the top-level ``system`` string (the Messages
    API has no system role). A plain, JSON-able dict: the cache key hashes it.

    ``thinking`` ({type: enabled, budget_tokens: N} with 1024 <= N < max_tokens, {type:
    adaptive} or {type: disabled}) is passed through as the API documents it
    (https://platform.claude.com/docs/en/build-with-claude/extended-thinking); ``effort`` is
    output_config.effort (low | medium | high | xhigh | max), for models that take it with
    adaptive thinking (https://platform.claude.com/docs/en/build-with-claude/effort);
    ``api_version`` the anthropic-version header (None: the SDK's, 2026-10-21).
    """
    if not params.model:
        raise ValueError(f"{PARAMS_SECTION}.model is required")
    system, turns = split_system(params.system_prompt, messages)
    kwargs: dict[str, Any] = {"model": params.model, "max_tokens": params.max_tokens,
                              "messages": [{"role": r, "content": c} for r, c in turns]}
    if system:
        kwargs["system"] = system
    if params.thinking is not None:
        kwargs["thinking"] = dict(params.thinking)
    if params.effort is not None:
        kwargs["output_config"] = {"effort": params.effort}
    sampling = {"temperature": params.temperature, "top_p": params.top_p}
    extra = {k: v for k, v in sampling.items() if v is not None}
    if extra:
        kwargs["extra_body"] = extra
    if params.api_version is not None:
        kwargs["extra_headers"] = {"anthropic-version": str(params.api_version)}
    return kwargs


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def parse_message(message: Any) -> dict[str, Any]:
    """An SDK ``Message`` (or its JSON as a dict) as plain data.

    ``text``: the text blocks only, joined (a ``<think>`` written into a text block stays
    answer text: the API puts thinking in its own blocks). ``reasoning``: the thinking blocks
    joined, ``None`` without any (redacted thinking has no readable text). ``usage``:
    ``prompt_tokens`` is all input (``input_tokens`` counts only the uncached part; the total is
    input + cache write + cache read, per the Usage object), ``completion_tokens`` is
    ``output_tokens``, which includes thinking
    (https://platform.claude.com/docs/en/build-with-claude/extended-thinking#pricing),
    ``reasoning_tokens`` is ``output_tokens_details.thinking_tokens`` (0 when absent).
    ``error_kind``: ``"blocked"`` for a refusal, ``"empty"`` for no content at all
    (``retryable``).
    """
    content = _get(message, "content")
    if not isinstance(content, list):
        raise ValueError("the message has no content list")
    texts, thoughts = [], []
    for block in content:
        kind = _get(block, "type")
        if kind == "text":
            texts.append(str(_get(block, "text") or ""))
        elif kind == "thinking":
            thoughts.append(str(_get(block, "thinking") or ""))
    usage = _get(message, "usage")
    details = _get(usage, "output_tokens_details")
    read = _int(_get(usage, "cache_read_input_tokens"))
    write = _int(_get(usage, "cache_creation_input_tokens"))
    stop = _get(message, "stop_reason")
    out: dict[str, Any] = {
        "text": "".join(texts),
        "reasoning": "\n\n".join(thoughts) if thoughts else None,
        "finish_reason": FINISH_REASONS.get(stop, stop),
        "usage": {"prompt_tokens": _int(_get(usage, "input_tokens")) + read + write,
                  "completion_tokens": _int(_get(usage, "output_tokens")),
                  "reasoning_tokens": _int(_get(details, "thinking_tokens")),
                  "cache_read_tokens": read, "cache_write_tokens": write},
        "model": _get(message, "model"),
        "error_kind": None, "error": None, "retryable": False,
    }
    if stop == "refusal":
        out.update(error_kind="blocked", error="the model refused (stop_reason: refusal)")
    elif not content:
        out.update(error_kind="empty", error="the reply has no content blocks", retryable=True)
    return out


# Statuses that stop the stage: every other item would fail the same way
# (https://platform.claude.com/docs/en/api/errors).
_FATAL = {401: "authentication failed (check the key in api_key_env)",
          402: "billing error", 403: "permission denied",
          404: "not found (check base_url and model)"}
# error.details.error_code values that no wait cures, whatever the status (a 429 among
# them): the spend caps and an organization on hold (the SDK's error classes, e.g.
# EnforcedSpendLimitReachedError: "crossed the monthly API usage threshold of its API tier").
_FATAL_CODES = {"enforced_spend_limit_reached": "monthly spend limit reached",
                "contract_spend_limit_reached": "contract spend limit reached",
                "linked_organization_spend_limit_reached": "organization spend limit reached",
                "linked_organization_billing_unavailable": "billing unavailable",
                "organization_on_hold": "organization on hold"}
_CONTEXT = re.compile(r"prompt is too long|context window|context length|too many tokens",
                      re.IGNORECASE)
# Request parameters, longest first, and the params key each comes from.
_PARAM_KEYS = {"thinking.budget_tokens": "thinking", "thinking": "thinking",
               "output_config.effort": "effort", "output_config": "effort",
               "max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
               "system": "system_prompt"}  # not "model": a wrong model is a 404


def named_parameter(message: str, sent: Mapping[str, Any]) -> str | None:
    """The request parameter a 400 message names, among those the request ``sent``."""
    body = {**sent, **(sent.get("extra_body") or {})}
    for param in sorted(_PARAM_KEYS, key=len, reverse=True):
        if param.split(".")[0] not in body:
            continue
        if re.search(rf"(?<![\w.]){re.escape(param)}(?![\w])", message):
            return param
    return None


# error.type -> its HTTP status (https://platform.claude.com/docs/en/api/errors): a Message
# Batches result that ``errored`` carries the type only.
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401,
                "billing_error": 402, "permission_error": 403, "not_found_error": 404,
                "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
                "timeout_error": 504, "overloaded_error": 529}


def classify_error(exc: BaseException, sent: Mapping[str, Any] | None = None) -> ErrorDecision:
    """An exception from ``messages.create`` as a decision; ``sent``: its keyword arguments."""
    import json

    import anthropic

    name = type(exc).__name__
    if isinstance(exc, anthropic.APIConnectionError):  # timeouts included
        timeout = isinstance(exc, anthropic.APITimeoutError)
        return ErrorDecision("retry", f"{name}: {exc}",
                             cause="timeout" if timeout else "connection")
    if isinstance(exc, anthropic.APIResponseValidationError | json.JSONDecodeError):
        return ErrorDecision("retry", f"malformed response body: {exc}", cause="malformed")
    if not isinstance(exc, anthropic.APIStatusError):
        return ErrorDecision("item", f"{name}: {exc}")
    return classify_status(exc.status_code, exc.type, exc.api_message or str(exc), sent,
                           getattr(exc, "error_code", None),
                           retry_after_s(exc.response.headers))


def classify_result_error(error: Any, sent: Mapping[str, Any] | None = None) -> ErrorDecision:
    """The ``error`` of an ``errored`` Message Batches result (an ErrorResponse, or its JSON)
    as ``classify_error`` decides the same error online (a 529 ``overloaded_error``: retry)."""
    inner = _get(error, "error") or error
    kind = _get(inner, "type")
    message = str(_get(inner, "message") or kind or "errored")
    code = _get(_get(inner, "details"), "error_code")
    return classify_status(ERROR_STATUS.get(str(kind), 500), kind, message, sent, code)


def classify_status(status: int, kind: str | None, message: str,
                    sent: Mapping[str, Any] | None = None, code: str | None = None,
                    wait: float | None = None) -> ErrorDecision:
    """An API error (HTTP ``status``, ``error.type`` ``kind``, ``error.details.error_code``
    ``code``) as a decision."""
    text = f"HTTP {status} {kind or ''}: {message}".replace("  ", " ")
    if code in _FATAL_CODES:
        return ErrorDecision("fatal", f"{_FATAL_CODES[code]}: {text}", status)
    if retryable_status(status):  # 529 is overloaded_error
        return ErrorDecision("retry", text, status, wait)
    if status in _FATAL:
        return ErrorDecision("fatal", f"{_FATAL[status]}: {text}", status)
    if status == 413:
        return ErrorDecision("item", text, status, kind="request_too_large")
    if status in (400, 422) and _CONTEXT.search(message):
        return ErrorDecision("item", text, status, kind="context_length")
    param = named_parameter(message, sent or {}) if status in (400, 422) else None
    if param is not None:
        key = f"{PARAMS_SECTION}.{_PARAM_KEYS[param]}"
        return ErrorDecision("parameter", f"{text} (change or null {key})", status,
                             param=param, params_key=key)
    return ErrorDecision("item", text, status)
