"""The OpenAI-compatible chat-completions transport: one request in, a ``ChatReply`` out.

Requests go through ``http``
(aiohttp directly, raising the official client's own exception types, messages and
``Retry-After`` headers), retried here with tenacity (429, 408/409, 5xx, timeouts, dropped
connections and garbled bodies are retried with full jitter, honouring ``Retry-After``). The
official ``AsyncOpenAI`` stack was about five times aiohttp's CPU per request at 64
connections (benchmarks/README.md). A request that still fails after
its retries marks only its item ``error``; configuration failures that would fail every item
(401, 403, 404) stop the stage with a ``StageError``, and so does a 400 that names a request
parameter the server rejects (``max_tokens`` or ``temperature`` on an OpenAI reasoning model):
a wrong configuration is reported once, naming the params key, instead of failing every item.
A 400 for a prompt over the model's context window is that item's error, kept as
``error_kind: context_length``. Reading the body and classifying those 400s is
``replies``.

The API key is read from the environment variable named by ``api_key_env`` and only ever handed
to the HTTP client; error messages are scrubbed of it (``redact.Redactor``).
"""

from __future__ import annotations

import ipaddress
import json
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
from stages.chat.openai.http import OpenAIHTTP
from stages.chat.openai.replies import (
    SAMPLING_KEYS,
    MalformedResponse,
    context_length_error,
    params_key,
    parse_completion,
    rejected_parameter,
)
from stages.chat.redact import DUMMY_API_KEY, Redactor
from stages.chat.transport import ChatReply, ChatTransport, TransportError
from stages.core.errors import StageError

# ``openai`` is imported only when a request fails (``http``): it is a good part of the
# process's start-up, and a clean run never needs it.

OPENAI_BASE_URL = "https://api.openai.com/v1"  # where base_url: null points
_CONNECT_TIMEOUT_S = 10.0  # reaching a server is quick even when its reply takes many minutes
_FATAL_STATUS = {401: "authentication failed", 403: "permission denied",
                 404: "not found (check base_url and model)"}


def normalise_base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StageError(f"params.yaml: predict.openai.base_url {url!r} is not an http(s) URL")
    if parts.username or parts.password or parts.query:
        # Credentials must come from the environment, never from params (they would be hashed,
        # cached and written into the predictions).
        raise StageError("params.yaml: predict.openai.base_url must not carry credentials or a "
                         "query string; put the key in the variable named by api_key_env")
    return url.rstrip("/")


def is_local_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private


def resolve_api_key(env_name: str | None, base_url: str) -> str:
    key = os.environ.get(env_name) if env_name else None
    if key:
        return key
    if env_name and not is_local_url(base_url):
        raise StageError(f"environment variable {env_name} (predict.openai.api_key_env) is not "
                         f"set, and {base_url} is not a local server")
    return DUMMY_API_KEY


def is_retryable(exc: BaseException) -> bool:
    """429, 408/409, 5xx, timeouts, dropped connections and garbled bodies are transient."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return isinstance(exc, MalformedResponse | openai.APIResponseValidationError
                      | json.JSONDecodeError)


def _is_connection_error(exc: BaseException) -> bool:
    import openai

    return isinstance(exc, openai.APIConnectionError)


def _is_timeout(exc: BaseException) -> bool:
    import openai

    return isinstance(exc, openai.APITimeoutError)


def _retry_after_s(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class OpenAITransport(ChatTransport):
    """Requests through ``http`` (the official client's errors), retried here."""

    def __init__(self, settings: dict[str, Any]) -> None:
        s = settings
        self.base_url = normalise_base_url(s["base_url"] or OPENAI_BASE_URL)
        self.concurrency = int(s["concurrency"])
        self._model: str = s["model"]
        self._sampling = {k: s[k] for k in SAMPLING_KEYS if s[k] is not None}
        self._extra_body: dict[str, Any] = dict(s["extra_body"] or {})
        self._attempts = int(s["max_retries"]) + 1
        self._wait = wait_random_exponential(multiplier=float(s["backoff_initial_s"]),
                                             max=float(s["backoff_max_s"]))
        self._backoff_max = float(s["backoff_max_s"])
        key = resolve_api_key(s["api_key_env"], self.base_url)
        self._redact = Redactor(key)
        self._timeout_s = float(s["timeout_s"])
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
        hint = _retry_after_s(state.outcome.exception() if state.outcome else None)
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
        body.update(body.pop("extra_body", None) or {})  # as the client merges extra_body
        attempt = 0
        try:
            async for retrying in AsyncRetrying(stop=stop_after_attempt(self._attempts),
                                                wait=self._backoff, reraise=True,
                                                retry=retry_if_exception(is_retryable)):
                with retrying:
                    attempt = retrying.retry_state.attempt_number
                    return self._scrub(await self._post(body))
        except Exception as exc:
            error = self._final_error(exc, attempt, request)
            if error is exc:
                raise
            raise error from None
        raise AssertionError("unreachable")  # AsyncRetrying either returns or raises

    def _final_error(self, exc: Exception, attempt: int, request: dict[str, Any]) -> Exception:
        """What a request that failed for good raises: ``StageError`` for a configuration
        that fails every item, else ``TransportError`` (``exc`` itself if it is a bug)."""
        import openai  # only once something failed: a clean run never imports it

        if isinstance(exc, openai.APIStatusError):
            if exc.status_code in _FATAL_STATUS:
                return StageError(f"{self.base_url}: HTTP {exc.status_code} "
                                  f"{_FATAL_STATUS[exc.status_code]}: "
                                  f"{self._redact(str(exc))[:300]}")
            param = rejected_parameter(exc, request)
            if param is not None:
                return StageError(
                    f"{self.base_url}: HTTP {exc.status_code}: the server rejects the request "
                    f"parameter '{param}'; change or null {params_key(param, request)} in "
                    f"params.yaml (null: not sent). Server said: "
                    f"{self._redact(str(exc))[:300]}")
            kind = "context_length" if context_length_error(exc) else None
            return self._failed(exc, attempt, kind)
        if isinstance(exc, openai.OpenAIError | MalformedResponse | ValueError):
            return self._failed(exc, attempt)
        return exc

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

    def _failed(self, exc: BaseException, attempts: int,
                kind: str | None = None) -> TransportError:
        import openai

        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, openai.APIConnectionError):  # "Connection error." alone says nothing
            cause = probe.connection_cause(exc, self.base_url)
            text += f" ({cause or f'{probe.root_cause(exc)} at {self.base_url}'})"
        error = TransportError(self._redact(f"failed after {attempts} attempt(s): {text}")[:500],
                               kind)
        error.transient = is_retryable(exc)
        return error

    async def probe(self) -> None:
        wait = min(probe.PROBE_TIMEOUT_S, self._timeout_s)
        await probe.probe_endpoint(lambda: self._http.get("/models", wait), self.base_url,
                                   wait, is_connection_error=_is_connection_error,
                                   is_timeout=_is_timeout)

    async def aclose(self) -> None:
        await self._http.aclose()
