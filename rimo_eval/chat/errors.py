"""The engine's own errors, and the one place that decides which of them are retried.

A transport's HTTP layer raises these (never another client library's types): a connection
that failed (``ConnectionFailed``, raised from the socket error so that ``probe`` can name the
cause), a timeout (``RequestTimeout``), an HTTP status >= 400 (``HTTPStatusError``, with the
server's message, ``code``, ``param`` and ``Retry-After``), and a 2xx body that is not a usable
completion (``MalformedResponse``). ``classify`` turns any of them into a ``RetryDecision``.

What a request that failed for good becomes is the transport's business: ``TransportError``
(``rimo_eval.chat.transport``) marks one item, ``StageError`` stops the stage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rimo_eval.chat.provider_decision import ErrorDecision, retry_after_s

# 408 Request Timeout, 409 Conflict (a busy worker), 429 Too Many Requests: worth another try.
RETRIED_STATUS = frozenset({408, 409, 429})


class EngineError(Exception):
    """A request that failed; see ``classify`` for whether it is tried again.

    ``decision``: set by a native provider's transport (``anthropic/``, ``gemini/``), whose
    classifier read the SDK's exception; ``kind``: the item's ``details.error_kind`` if it
    fails for good."""

    decision: ErrorDecision | None = None
    kind: str | None = None


class ConnectionFailed(EngineError):
    """No reply: refused, reset, DNS or TLS failure (the cause is chained)."""


class RequestTimeout(ConnectionFailed):
    """No reply within the connect or read timeout."""


class MalformedResponse(EngineError):
    """HTTP 2xx with a body that is not a usable chat completion."""


class HTTPStatusError(EngineError):
    """An HTTP status >= 400, with what the server said about it."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers
        error = _error_object(body)
        self.code = error.get("code") if isinstance(error.get("code"), str) else None
        self.param = error.get("param") if isinstance(error.get("param"), str) else None
        message = error.get("message")
        self.message = message if isinstance(message, str) and message else (
            body.decode("utf-8", "replace").strip() or "(empty body)")
        super().__init__(f"HTTP {status}: {self.message}")

    @property
    def retry_after_s(self) -> float | None:
        """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), as every
        transport reads it (``provider_decision.retry_after_s``)."""
        return retry_after_s(self.headers)


def _error_object(body: bytes) -> dict[str, Any]:
    """``{"error": {"message", "code", "param"}}`` as OpenAI-compatible servers send it, or
    the top-level object; ``{}`` for a body that is not JSON."""
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    if isinstance(data, dict) and isinstance(error := data.get("error"), dict):
        return error
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return {"message": data["error"]}  # vLLM and some proxies: a bare string
    return data if isinstance(data, dict) else {}


class ProviderStatusError(HTTPStatusError):
    """An HTTP status >= 400 that a native provider's SDK raised, as its classifier read it
    (the message, the parameter named, the Retry-After hint)."""

    def __init__(self, decision: ErrorDecision) -> None:
        EngineError.__init__(self, decision.message)
        self.status = int(decision.status or 0)
        self.headers, self.code, self.param = {}, None, decision.param
        self.message, self.decision, self.kind = decision.message, decision, decision.kind

    @property
    def retry_after_s(self) -> float | None:
        return self.decision.retry_after_s if self.decision else None


@dataclass(frozen=True)
class RetryDecision:
    """``retry``: worth another attempt after the backoff; such a failure is also transient
    (the server or the network, not this request), which is what the circuit breaker counts.
    ``wait_s``: the server's own hint (``Retry-After``), honoured up to the backoff's maximum."""

    retry: bool
    wait_s: float | None = None


def classify(exc: BaseException) -> RetryDecision:
    """429, 408/409, 5xx, timeouts, dropped connections and garbled bodies are retried; every
    other status (400, 401, 403, 404, 422...) and anything unexpected is not. A native
    provider's classifier has the last word where it decided (a 429 for a monthly spend cap
    is not worth a retry)."""
    decision = exc.decision if isinstance(exc, EngineError) else None
    if decision is not None:
        return RetryDecision(decision.retryable,
                             decision.retry_after_s if decision.retryable else None)
    if isinstance(exc, HTTPStatusError):
        retry = exc.status in RETRIED_STATUS or exc.status >= 500
        return RetryDecision(retry, exc.retry_after_s if retry else None)
    return RetryDecision(isinstance(exc, ConnectionFailed | MalformedResponse))
