"""The OpenAI-compatible chat-completions transport: one request in, a ``ChatReply`` out.

Requests go through ``http`` (aiohttp directly, raising the engine's own errors,
``stages.chat.errors``), retried here with tenacity as ``errors.classify`` decides: 429,
408/409, 5xx, timeouts, dropped connections and garbled bodies, with full jitter, honouring
``Retry-After``. A request that still fails after its retries marks only its item ``error``;
configuration failures that would fail every item (401, 403, 404) stop the stage with a
``StageError``, and so does a 400 that names a request parameter the server rejects
(``max_tokens`` or ``temperature`` on an OpenAI reasoning model): a wrong configuration is
reported once, naming the params key of the section that runs (``predict.openai``, ``judge``),
instead of failing every item. A 400 for a prompt over the model's context window is that
item's error, kept as ``error_kind: context_length``. Reading the body and classifying those
400s is ``replies``.

The API key is read from the environment variable named by ``api_key_env`` and only ever handed
to the HTTP client; error messages are scrubbed of it (``redact.Redactor``).
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any
from urllib.parse import urlsplit

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from stages.chat import probe
from stages.chat.errors import ConnectionFailed, EngineError, HTTPStatusError, classify
from stages.chat.openai.http import OpenAIHTTP
from stages.chat.openai.replies import (
    SAMPLING_KEYS,
    context_length_error,
    params_key,
    parse_completion,
    rejected_parameter,
)
from stages.chat.redact import DUMMY_API_KEY, Redactor
from stages.chat.transport import ChatReply, ChatTransport, TransportError
from stages.core.config import ChatParams
from stages.core.errors import StageError

OPENAI_BASE_URL = "https://api.openai.com/v1"  # where base_url: null points
_CONNECT_TIMEOUT_S = 10.0  # reaching a server is quick even when its reply takes many minutes
_FATAL_STATUS = {401: "authentication failed", 403: "permission denied",
                 404: "not found (check base_url and model)"}


def is_local_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private


def resolve_api_key(env_name: str | None, base_url: str, section: str) -> str:
    key = os.environ.get(env_name) if env_name else None
    if key:
        return key
    if env_name and not is_local_url(base_url):
        raise StageError(f"environment variable {env_name} ({section}.api_key_env) is not "
                         f"set, and {base_url} is not a local server")
    return DUMMY_API_KEY


def _retryable(exc: BaseException) -> bool:
    return classify(exc).retry


class OpenAITransport(ChatTransport):
    """Requests through ``http``, retried here. ``section``: where ``params`` came from."""

    def __init__(self, params: ChatParams, section: str) -> None:
        self.section = section
        # Checked by ChatParams (an http(s) URL without credentials); only the slash goes.
        self.base_url = (params.base_url or OPENAI_BASE_URL).rstrip("/")
        self.concurrency = params.concurrency
        self._model = params.model
        self._sampling = {k: getattr(params, k) for k in SAMPLING_KEYS
                          if getattr(params, k) is not None}
        self._extra_body: dict[str, Any] = dict(params.extra_body or {})
        self._attempts = params.max_retries + 1
        self._wait = wait_random_exponential(multiplier=float(params.backoff_initial_s),
                                             max=float(params.backoff_max_s))
        self._backoff_max = float(params.backoff_max_s)
        key = resolve_api_key(params.api_key_env, self.base_url, section)
        self._redact = Redactor(key)
        self._timeout_s = float(params.timeout_s)
        self._fatal: StageError | None = None
        self._http = OpenAIHTTP(self.base_url, key, self._timeout_s,
                                min(_CONNECT_TIMEOUT_S, self._timeout_s), self.concurrency)

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

    def _backoff(self, state: RetryCallState) -> float:
        # Full jitter (tenacity's random exponential) spreads 64 workers that hit the same 429
        # burst; a Retry-After hint is honoured up to backoff_max_s.
        wait = self._wait(state)
        exc = state.outcome.exception() if state.outcome else None
        hint = classify(exc).wait_s if exc is not None else None
        return max(wait, min(hint, self._backoff_max)) if hint else wait

    async def send(self, request: dict[str, Any]) -> ChatReply:
        if self._fatal is not None:  # the stage is stopping: send nothing more
            raise self._fatal
        try:
            return await self._send(request)
        except StageError as exc:
            self._fatal = exc
            raise

    async def _send(self, request: dict[str, Any]) -> ChatReply:
        body = dict(request)
        body.update(body.pop("extra_body", None) or {})  # as the official client merges it
        attempt = 0
        try:
            async for retrying in AsyncRetrying(stop=stop_after_attempt(self._attempts),
                                                wait=self._backoff, reraise=True,
                                                retry=retry_if_exception(_retryable)):
                with retrying:
                    attempt = retrying.retry_state.attempt_number
                    return self._scrub(await self._post(body))
        except EngineError as exc:
            raise self._final_error(exc, attempt, request) from None
        raise AssertionError("unreachable")  # AsyncRetrying either returns or raises

    def _final_error(self, exc: EngineError, attempt: int, request: dict[str, Any]
                     ) -> StageError | TransportError:
        """What a request that failed for good raises: ``StageError`` for a configuration
        that fails every item, else ``TransportError``."""
        if isinstance(exc, HTTPStatusError):
            if exc.status in _FATAL_STATUS:
                return StageError(f"{self.base_url}: HTTP {exc.status} "
                                  f"{_FATAL_STATUS[exc.status]}: "
                                  f"{self._redact(str(exc))[:300]}")
            param = rejected_parameter(exc, request)
            if param is not None:
                return StageError(
                    f"{self.base_url}: HTTP {exc.status}: the server rejects the request "
                    f"parameter '{param}'; change or null "
                    f"{params_key(param, request, self.section)} in params.yaml (null: not "
                    f"sent). Server said: {self._redact(str(exc))[:300]}")
            return self._failed(exc, attempt, "context_length" if context_length_error(exc)
                                else None)
        return self._failed(exc, attempt)

    async def _post(self, body: dict[str, Any]) -> ChatReply:
        return parse_completion(*await self._http.post_json("/chat/completions", body))

    def _scrub(self, reply: ChatReply) -> ChatReply:
        """A server may echo the key in any string field; none of them may reach the cache."""
        def clean(value: str | None) -> str | None:
            return None if value is None else self._redact.exact(value)

        reply.texts = [self._redact.exact(t) for t in reply.texts]
        reply.finish_reasons = [clean(f) for f in reply.finish_reasons]
        reply.model = clean(reply.model)
        reply.reasoning = [clean(r) for r in reply.reasoning]
        return reply

    def _failed(self, exc: EngineError, attempts: int, kind: str | None = None
                ) -> TransportError:
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ConnectionFailed):  # "connection error" alone says nothing
            cause = probe.connection_cause(exc, self.base_url)
            text += f" ({cause or f'{probe.root_cause(exc)} at {self.base_url}'})"
        error = TransportError(self._redact(f"failed after {attempts} attempt(s): {text}")[:500],
                               kind)
        error.transient = classify(exc).retry
        return error

    async def probe(self) -> None:
        wait = min(probe.PROBE_TIMEOUT_S, self._timeout_s)
        await probe.probe_endpoint(lambda: self._http.get("/models", wait), self.base_url,
                                   wait, self.section)

    async def aclose(self) -> None:
        await self._http.aclose()
