"""Gemini API (``google-genai``) <-> plain data: the pure half of ``predict.backend: gemini``.

Design note (issue 22; the transport is ``transport.py`` beside this, over
``rimo_eval.chat.native``):

- How it plugs in. The transport (``transport.py``, a ``ChatTransport``) holds one
  ``genai.Client(api_key=...,
  http_options=types.HttpOptions(base_url=..., api_version="v1beta", timeout=ms,
  retry_options=types.HttpRetryOptions(attempts=1)))`` and does ``request(messages, sample) ->
  generate_kwargs(params, messages, sample)`` (the cache key hashes that dict; sample j is
  sent ``seed + j`` when a seed is set, as the openai backend does), ``send ->
  parse_response(await client.aio.models.generate_content(**kwargs))``, and on an exception
  ``classify_error(exc, kwargs)``, mapping its ``action`` onto the engine's errors: ``retry``
  (``retry_after_s`` the floor of the backoff), ``fatal`` (the stage stops), ``parameter``
  (the stage stops naming ``params_key``), ``item`` (that item's error, with ``kind``). A
  parsed reply with ``error_kind`` set (``blocked``, ``empty``) is that item's error
  (``retryable``: retry it first). Three SDK defaults must be overridden, each measured against
  ``tests/support/fake_gemini.py``: without ``retry_options`` the async (aiohttp) client silently
  retries a dropped connection after 1-10 s sleeps, outside the engine's retries and breaker;
  ``api_version`` defaults to ``v1`` in google-genai 3.6.1 (``v1beta`` documents thinking
  levels and thought parts); and ``automatic_continuation`` (on by default) re-sends a request
  that ends in ``CONTINUATION``, extra billed requests the cache never sees, with no cap on
  the hops (against a fake that always answers ``CONTINUATION`` it sent 1431 requests in 3 s),
  so ``generate_kwargs`` turns it off and such a reply counts as ``length``.
- How decisions reach the engine (``rimo_eval.chat.native``): each becomes the engine's own error
  (``errors.error_for``: ``ProviderStatusError`` for a status, ``ConnectionFailed`` /
  ``RequestTimeout`` / ``MalformedResponse`` by ``cause``) with the decision attached, which
  ``retrying`` honours; ``fatal`` and ``parameter`` are ``StageError``, ``item`` is
  ``TransportError(message, kind)`` (``RetryingTransport.final_error``); messages go through
  ``rimo_eval.chat.redact`` first.
- User-facing documentation: docs/backends.md, "Claude and Gemini, natively".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rimo_eval.chat.errors import ErrorDecision, retry_after_s, retryable_status
from rimo_eval.chat.messages import split_system
from rimo_eval.params.chat import GeminiParams

PARAMS_SECTION = "predict.gemini"

_THINKING_KEYS = {"thinking_budget", "thinking_level", "include_thoughts"}

# finishReason -> the engine's finish reasons ("stop", "length", "content_filter", ...), from
# Candidate.FinishReason (https://ai.google.dev/api/generate-content#FinishReason). A reply
# cut off by the per-request limit (CONTINUATION) is "length": it is not continued.
FINISH_REASONS = {"STOP": "stop", "MAX_TOKENS": "length", "CONTINUATION": "length"}
# Candidates stopped by a filter: that item's ``error_kind: blocked``.
BLOCKED = {"SAFETY", "RECITATION", "LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
           "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR",
           "ESCALATION", "PUP_LIMITED_DISABLED"}


def generate_kwargs(params: GeminiParams, messages: Sequence[Mapping[str, str]],
                    sample: int = 0) -> dict[str, Any]:
    """The keyword arguments of ``client.models.generate_content`` for chat ``messages``, from
    the typed section (``None`` is "not sent": the model's default). ``max_output_tokens``,
    ``temperature``, ``top_p`` and ``seed`` are fields of GenerateContentConfig
    (https://ai.google.dev/api/generate-content#generationconfig); ``thinking_config`` is
    {thinking_budget: N} or {thinking_level: low|high|...}, and include_thoughts: true to
    receive the thought parts (https://ai.google.dev/gemini-api/docs/generate-content/thinking).

    System messages, after ``system_prompt``, become ``config.system_instruction``; user
    and assistant turns become ``contents`` with roles ``user`` and ``model``
    (https://ai.google.dev/api/caching#Content). A plain, JSON-able dict (the cache key).
    """
    if not params.model:
        raise ValueError(f"{PARAMS_SECTION}.model is required")
    thinking = params.thinking_config
    if thinking is not None and set(thinking) - _THINKING_KEYS:
        raise ValueError(f"{PARAMS_SECTION}.thinking_config takes only "
                         f"{sorted(_THINKING_KEYS)}")
    system, turns = split_system(params.system_prompt, messages)
    contents = [{"role": "user" if r == "user" else "model", "parts": [{"text": c}]}
                for r, c in turns]
    sent = {"max_output_tokens": params.max_output_tokens, "temperature": params.temperature,
            "top_p": params.top_p, "seed": params.seed}
    config: dict[str, Any] = {k: v for k, v in sent.items() if v is not None}
    if sample and "seed" in config:
        config["seed"] += sample
    if system:
        config["system_instruction"] = system
    if thinking is not None:
        config["thinking_config"] = dict(thinking)
    config["automatic_continuation"] = False  # one engine request, one HTTP request
    return {"model": params.model, "contents": contents, "config": config}


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _enum(value: Any) -> str | None:
    value = getattr(value, "value", value)
    return str(value) if value is not None else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def parse_response(response: Any) -> dict[str, Any]:
    """An SDK ``GenerateContentResponse`` (or its ``model_dump()``) as plain data.

    ``text``: the first candidate's parts that are not thoughts, joined; ``reasoning``: its
    ``thought: true`` parts, ``None`` without any. ``usage``
    (https://ai.google.dev/api/generate-content#UsageMetadata): ``prompt_tokens`` is
    ``promptTokenCount`` (cached content included), ``completion_tokens`` is
    ``candidatesTokenCount + thoughtsTokenCount`` (candidates exclude thoughts; both are billed
    as output), ``reasoning_tokens`` the thoughts, ``cache_read_tokens``
    ``cachedContentTokenCount``, ``cache_write_tokens`` 0 (implicit caching has no write
    charge). ``error_kind``: ``"blocked"`` for a blocked prompt (``promptFeedback.blockReason``)
    or a candidate stopped by a filter, ``"empty"`` for no candidate, or one with no parts
    that did not stop at the token limit (``retryable``).
    """
    usage = _get(response, "usage_metadata")
    candidates = _get(response, "candidates") or []
    thoughts_n = _int(_get(usage, "thoughts_token_count"))
    out: dict[str, Any] = {
        "text": "", "reasoning": None, "finish_reason": None,
        "usage": {"prompt_tokens": _int(_get(usage, "prompt_token_count")),
                  "completion_tokens": _int(_get(usage, "candidates_token_count")) + thoughts_n,
                  "reasoning_tokens": thoughts_n,
                  "cache_read_tokens": _int(_get(usage, "cached_content_token_count")),
                  "cache_write_tokens": 0},
        "model": _get(response, "model_version"),
        "error_kind": None, "error": None, "retryable": False,
    }
    block = _enum(_get(_get(response, "prompt_feedback"), "block_reason"))
    if block:
        out.update(error_kind="blocked", error=f"prompt blocked (promptFeedback.blockReason: "
                   f"{block})")
        return out
    if not candidates:
        out.update(error_kind="empty", error="the response has no candidates", retryable=True)
        return out
    first = candidates[0]
    finish = _enum(_get(first, "finish_reason"))
    parts = _get(_get(first, "content"), "parts") or []
    texts = [str(_get(p, "text")) for p in parts if _get(p, "text") and not _get(p, "thought")]
    thoughts = [str(_get(p, "text")) for p in parts if _get(p, "text") and _get(p, "thought")]
    out.update(text="".join(texts), reasoning="\n\n".join(thoughts) if thoughts else None,
               finish_reason=FINISH_REASONS.get(finish or "", (finish or "").lower() or None))
    if finish in BLOCKED:
        out.update(finish_reason="content_filter", error_kind="blocked",
                   error=f"candidate blocked (finishReason: {finish})")
    elif not parts and finish not in ("MAX_TOKENS", "CONTINUATION"):
        # No parts after MAX_TOKENS is thinking that used up max_output_tokens: a truncated
        # reply ("length"), which a retry would only pay for again.
        out.update(error_kind="empty", error=f"the candidate has no parts (finishReason: "
                   f"{finish})", retryable=True)
    return out


# Not retried, unlike the engine's other backends (a decision, not an oversight): Google maps
# HTTP 409 to ABORTED ("retry at a higher level", i.e. not this same call: a call that only
# needs a wait is UNAVAILABLE, 503) or ALREADY_EXISTS (no retry can cure it)
# (https://github.com/googleapis/googleapis/blob/master/google/rpc/code.proto; AIP-194
# retries UNAVAILABLE only), the Gemini API lists no 409 for generateContent
# (https://ai.google.dev/gemini-api/docs/troubleshooting), and neither google-genai's own
# retry (408, 429, 500, 502, 503, 504) nor inspect_ai's Google provider (408, 429, 5xx)
# retries it. So a 409 is that item's error, which a re-run sends again (only replies are
# cached). The OpenAI and Anthropic SDKs do retry 409 (their lock timeouts), hence
# ``errors.RETRIED_STATUS``.
CONFLICT = 409

# Statuses that stop the stage (https://ai.google.dev/gemini-api/docs/troubleshooting).
_FATAL = {401: "authentication failed (check the key in api_key_env)",
          403: "permission denied (check the key in api_key_env)",
          404: "not found (check base_url and model)"}
_CONTEXT = re.compile(r"input token count.*exceeds|exceeds the maximum number of tokens"
                      r"|context (window|length)", re.IGNORECASE)
# Request fields (as errors name them, proto or JSON spelling) and their params keys.
_FIELD_KEYS = {"thinking_config": "thinking_config", "thinkingconfig": "thinking_config",
               "thinking_budget": "thinking_config", "thinkingbudget": "thinking_config",
               "thinking_level": "thinking_config", "thinkinglevel": "thinking_config",
               "include_thoughts": "thinking_config", "includethoughts": "thinking_config",
               "max_output_tokens": "max_output_tokens",
               "maxoutputtokens": "max_output_tokens", "temperature": "temperature",
               "top_p": "top_p", "topp": "top_p", "seed": "seed",
               "system_instruction": "system_prompt", "systeminstruction": "system_prompt"}
_UNKNOWN_NAME = re.compile(r'Unknown name "([^"]+)"')


def _details(exc: Any) -> list[Mapping[str, Any]]:
    body = _get(exc, "details")
    error = _get(body, "error") if isinstance(body, Mapping) and "error" in body else body
    details = _get(error, "details") if isinstance(error, Mapping) else None
    return [d for d in details or [] if isinstance(d, Mapping)]


def _duration_s(value: Any) -> float | None:
    # google.protobuf.Duration in JSON: "30s", "1.5s"
    match = re.fullmatch(r"\s*([0-9.]+)s\s*", str(value or ""))
    return float(match.group(1)) if match else None


def _named_field(exc: Any, message: str) -> tuple[str | None, str | None]:
    """(field as the error names it, its params key) for a 400 naming a request field."""
    names = [str(v.get("field", "")) for d in _details(exc)
             for v in d.get("fieldViolations") or [] if isinstance(v, Mapping)]
    names += _UNKNOWN_NAME.findall(message)
    for name in names:
        for segment in reversed(name.split(".")):
            key = _FIELD_KEYS.get(segment.lower())
            if key is not None:
                return name, f"{PARAMS_SECTION}.{key}"
    return (names[0], f"{PARAMS_SECTION}") if names else (None, None)


def classify_error(exc: BaseException, sent: Mapping[str, Any] | None = None) -> ErrorDecision:
    """An exception from ``generate_content`` as a decision; ``sent``: its keyword arguments
    (unused today: Gemini names the field itself)."""
    import asyncio
    import json

    import aiohttp
    import httpx2
    from google.genai import errors

    name = type(exc).__name__
    if isinstance(exc, httpx2.TransportError | aiohttp.ClientError | asyncio.TimeoutError
                  | TimeoutError):
        timeout = isinstance(exc, httpx2.TimeoutException | asyncio.TimeoutError
                             | TimeoutError | aiohttp.ServerTimeoutError)
        return ErrorDecision("retry", f"{name}: {exc}",
                             cause="timeout" if timeout else "connection")
    if isinstance(exc, json.JSONDecodeError):
        return ErrorDecision("retry", f"malformed response body: {exc}", cause="malformed")
    if not isinstance(exc, errors.APIError):
        return ErrorDecision("item", f"{name}: {exc}")
    status = int(exc.code or 0)
    message = str(exc.message or exc)
    text = f"HTTP {status} {exc.status or ''}: {message}"
    reasons = {str(d.get("reason")) for d in _details(exc) if d.get("reason")}
    if retryable_status(status) and status != CONFLICT:
        wait = retry_after_s(getattr(exc.response, "headers", None))
        if wait is None:
            delays = [_duration_s(d.get("retryDelay")) for d in _details(exc)]
            wait = next((w for w in delays if w is not None), None)
        return ErrorDecision("retry", text, status, wait)
    if status in _FATAL or "API_KEY_INVALID" in reasons:
        return ErrorDecision("fatal", f"{_FATAL.get(status, 'invalid API key')}: {text}",
                             status)
    if exc.status == "FAILED_PRECONDITION":  # no free tier here, billing not enabled
        return ErrorDecision("fatal", f"precondition failed (check billing): {text}", status)
    if status == 400 and _CONTEXT.search(message):
        return ErrorDecision("item", text, status, kind="context_length")
    if status == 400:
        field, key = _named_field(exc, message)
        if field is not None:
            return ErrorDecision("parameter", f"{text} (change or null {key})", status,
                                 param=field, params_key=key)
    return ErrorDecision("item", text, status)
