"""The OpenAI-compatible chat-completions transport: one request in, a ``ChatReply`` out.

Requests go through ``http`` (aiohttp directly, raising the engine's own errors,
``rimo_eval.chat.errors``), retried by ``rimo_eval.chat.retrying`` as ``errors.classify``
decides: 429, 408/409, 5xx, timeouts, dropped connections and garbled bodies, with full
jitter, honouring ``Retry-After``. A request that still fails after its retries marks only
its item ``error``; ``decide`` adds what only this transport knows: configuration failures
that would fail every item (401, 403, 404) are ``fatal`` and a 400 that names a request
parameter the server rejects (``max_tokens`` or ``temperature`` on an OpenAI reasoning model)
is ``parameter``; both stop the stage with a ``StageError``: a wrong configuration is reported
once, naming the params key of the section that runs (``predict.openai``, ``judge``), instead
of failing every item. A 400 for a prompt over the model's context window is that item's
error, kept as ``error_kind: context_length``. Reading the body and classifying those 400s is
``replies``.

The API key is read from the environment variable named by ``api_key_env`` and only ever handed
to the HTTP client; error messages are scrubbed of it (``redact.Redactor``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from rimo_eval.chat import probe
from rimo_eval.chat.api_key import key_source, resolve_api_key
from rimo_eval.chat.errors import (
    ConnectionFailed,
    EngineError,
    ErrorDecision,
    HTTPStatusError,
    RequestTimeout,
    classify,
)
from rimo_eval.chat.openai.http import OpenAIHTTP
from rimo_eval.chat.openai.replies import (
    SAMPLING_KEYS,
    context_length_error,
    params_key,
    parse_completion,
    rejected_parameter,
)
from rimo_eval.chat.redact import Redactor
from rimo_eval.chat.retrying import RetryingTransport
from rimo_eval.chat.transport import ChatReply
from rimo_eval.params.chat import ChatParams

OPENAI_BASE_URL = "https://api.openai.com/v1"  # where base_url: null points
_CONNECT_TIMEOUT_S = 10.0  # reaching a server is quick even when its reply takes many minutes
_FATAL_STATUS = {401: "authentication failed", 403: "permission denied",
                 404: "not found (check base_url and model)"}


class OpenAITransport(RetryingTransport):
    """Requests through ``http``, retried by ``RetryingTransport``. ``section``: where
    ``params`` came from."""

    def __init__(self, params: ChatParams, section: str) -> None:
        # Checked by ChatParams (an http(s) URL without credentials); only the slash goes.
        base_url = (params.base_url or OPENAI_BASE_URL).rstrip("/")
        key = resolve_api_key(params.api_key_env, base_url, section)
        super().__init__(section=section, base_url=base_url, max_retries=params.max_retries,
                         backoff_initial_s=params.backoff_initial_s,
                         backoff_max_s=params.backoff_max_s,
                         redact=Redactor(key, key_source(params.api_key_env, section)))
        self.concurrency = params.concurrency
        self._model = params.model
        self._sampling = {k: getattr(params, k) for k in SAMPLING_KEYS
                          if getattr(params, k) is not None}
        self._extra_body: dict[str, Any] = dict(params.extra_body or {})
        self._timeout_s = float(params.timeout_s)
        self._http = OpenAIHTTP(self.base_url, key, self._timeout_s,
                                min(_CONNECT_TIMEOUT_S, self._timeout_s), self.concurrency,
                                params.max_reply_bytes, f"{section}.max_reply_bytes")
        self._models: asyncio.Future[bytes] | None = None

    def endpoint(self) -> dict[str, Any]:
        # base_url is part of the key: a model name alone ("default", "gpt-oss") does not say
        # which weights answer, and a cache must never serve another server's reply. The cost
        # is that moving the same model to another URL starts a cold cache.
        return {"transport": "openai-chat", "base_url": self.base_url}

    def request(self, messages: list[dict[str, str]], sample: int = 0) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self._model, "messages": messages, **self._sampling}
        if sample and "seed" in request:
            request["seed"] += sample
        if self._extra_body:
            request["extra_body"] = self._extra_body
        return request

    async def _attempt(self, request: dict[str, Any]) -> ChatReply:
        body = dict(request)
        body.update(body.pop("extra_body", None) or {})  # as the official client merges it
        return await self._post(body)

    def decide(self, exc: EngineError, request: dict[str, Any]) -> ErrorDecision:
        """``errors.classify``, and for a status it does not retry: ``fatal`` for a
        configuration that fails every item (401, 403, 404), ``parameter`` for a request
        parameter the server rejects, ``item`` with ``kind: context_length`` for a prompt
        over the context window."""
        decision = classify(exc)
        if decision.retryable or not isinstance(exc, HTTPStatusError):
            return decision
        if exc.status in _FATAL_STATUS:
            return ErrorDecision("fatal", f"HTTP {exc.status} {_FATAL_STATUS[exc.status]}: "
                                 f"{exc}", exc.status)
        param = rejected_parameter(exc, request)
        if param is not None:
            return ErrorDecision("parameter", str(exc), exc.status, param=param,
                                 params_key=params_key(param, request, self.section))
        if context_length_error(exc):
            return ErrorDecision("item", str(exc), exc.status, kind="context_length")
        return decision

    async def _post(self, body: dict[str, Any]) -> ChatReply:
        return parse_completion(*await self._http.post_json("/chat/completions", body))

    def _list_models(self) -> asyncio.Future[bytes]:
        """``GET /models``, once a run: the served identity and the probe share its answer."""
        if self._models is None:
            wait = min(probe.PROBE_TIMEOUT_S, self._timeout_s)
            self._models = asyncio.ensure_future(self._http.get("/models", wait))
        return self._models

    async def probe(self) -> None:
        wait = min(probe.PROBE_TIMEOUT_S, self._timeout_s)
        await probe.probe_endpoint(lambda: asyncio.shield(self._list_models()), self.base_url,
                                   wait, self.section)

    def served_name(self) -> str | None:
        return self._model

    async def served_identity(self) -> dict[str, Any] | None:
        if self._model is None:
            return {}
        try:
            body = await asyncio.shield(self._list_models())
        except (ConnectionFailed, RequestTimeout):
            return None  # not reachable now: the probe says so if anything must be sent
        except HTTPStatusError as exc:
            return None if exc.status >= 500 else {}  # 404: a server without /models
        try:
            return probe.identity(json.loads(body), self._model)
        except (ValueError, RecursionError):  # not JSON: it reports nothing
            return {}

    async def aclose(self) -> None:
        await self._http.aclose()
