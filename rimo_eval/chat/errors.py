"""What a failed request means: the engine's own errors, and the one decision each becomes.

A transport's HTTP layer raises these (never another client library's types): a connection
that failed (``ConnectionFailed``, raised from the socket error so that ``probe`` can name the
cause), a timeout (``RequestTimeout``), an HTTP status >= 400 (``HTTPStatusError``, with the
server's message, ``code``, ``param`` and ``Retry-After``), a 2xx body that is not a usable
completion (``MalformedResponse``), a body the engine refuses to read (``BadReply``: over the
size cap, or JSON nested past the parser's depth), and a status that a native provider's SDK raised
(``ProviderStatusError``, as that provider's classifier read it).

Every failure becomes one ``ErrorDecision``: ``retry``, ``fatal`` (the stage stops),
``parameter`` (the stage stops naming the params key to change) or ``item`` (that item's
error). ``classify`` is the rule every transport shares (``retryable_status`` the one rule for
statuses); a transport that knows more adds it (``RetryingTransport.decide``: the OpenAI
transport's 401/403/404 and rejected parameters), and a native provider's classifier
(``anthropic/translate.py``, ``gemini/translate.py``) decides its SDK's errors itself and
attaches the decision. ``RetryingTransport`` retries, waits and turns the decision of a
request that failed for good into ``StageError`` or ``TransportError``.

No import from the rest of ``rimo_eval``: the translate modules, pure functions of the SDKs'
objects, use this too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

Action = Literal["retry", "fatal", "parameter", "item"]

# 408 Request Timeout, 409 Conflict, 429 Too Many Requests, and every 5xx (Anthropic's 529
# "overloaded" among them): worth another try. 409 is what the OpenAI and Anthropic SDKs
# retry as a lock timeout (their ``_should_retry``); Gemini's classifier leaves it out on
# purpose (see ``gemini/translate.py``: Google's 409 is ABORTED or ALREADY_EXISTS).
RETRIED_STATUS = frozenset({408, 409, 429})


def retryable_status(status: int) -> bool:
    """The one rule for which HTTP statuses are retried (online, in a batch, on a create)."""
    return status in RETRIED_STATUS or status >= 500


@dataclass(frozen=True)
class ErrorDecision:
    """What a failed call means. ``action``: ``retry`` (worth another attempt after the
    backoff; such a failure is also transient, the server or the network, not this request,
    which is what the circuit breaker counts), ``fatal`` | ``parameter`` (every item would
    fail the same way: the stage stops) or ``item`` (that item's error).
    ``retry_after_s``: the server's own hint (``Retry-After``), honoured up to the backoff's
    maximum."""

    action: Action
    message: str
    status: int | None = None
    retry_after_s: float | None = None
    param: str | None = None  # the request parameter a 400 names
    params_key: str | None = None  # the params.yaml key to change
    kind: str | None = None  # details.error_kind of an item error
    # Why a retry without a status: "connection", "timeout" or "malformed" (the engine's
    # ConnectionFailed, RequestTimeout, MalformedResponse).
    cause: str | None = None

    @property
    def retryable(self) -> bool:
        return self.action == "retry"


def retry_after_s(headers: Any) -> float | None:
    """``retry-after-ms``, else ``retry-after`` in seconds or as an HTTP date (what the
    anthropic SDK itself honours; https://platform.claude.com/docs/en/api/rate-limits)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(float(ms) / 1000, 0.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            when: datetime = parsedate_to_datetime(value)
            left: float = (when - datetime.now(UTC)).total_seconds()
            return max(left, 0.0)
    except (TypeError, ValueError):
        return None


class EngineError(Exception):
    """A request that failed; ``classify`` says what it means.

    ``decision``: set where a classifier decided (a native provider's, or the transport's
    ``decide`` once an attempt failed); ``kind``: the item's ``details.error_kind`` if it
    fails for good."""

    decision: ErrorDecision | None = None
    kind: str | None = None


class ConnectionFailed(EngineError):
    """No reply: refused, reset, DNS or TLS failure (the cause is chained)."""


class RequestTimeout(ConnectionFailed):
    """No reply within the connect or read timeout."""


class MalformedResponse(EngineError):
    """HTTP 2xx with a body that is not a usable chat completion."""


class BadReply(EngineError):
    """A body the engine will not read: larger than ``max_reply_bytes`` decoded (``kind``
    ``reply_too_large``) or JSON nested deeper than the parser goes (``json_too_deep``).

    That item's error (``classify``'s last rule), never retried: unlike a body cut short by
    the network, it is what the server chose to send, and another try would be paid for and
    read again for the same answer. Recorded as the item's ``details.error_kind``."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def reply_too_large(cap_key: str, max_bytes: int, detail: str) -> BadReply:
    """The ``BadReply`` of a body past its cap (every transport's; ``cap_key`` names it)."""
    return BadReply(f"the reply is larger than {cap_key} = {max_bytes} bytes decoded "
                    f"({detail})", "reply_too_large")


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
        """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
        return retry_after_s(self.headers)


def _error_object(body: bytes) -> dict[str, Any]:
    """``{"error": {"message", "code", "param"}}`` as OpenAI-compatible servers send it, or
    the top-level object; ``{}`` for a body that is not JSON."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return {}
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        error: dict[str, Any] = data["error"]
        return error
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return {"message": data["error"]}  # vLLM and some proxies: a bare string
    return data if isinstance(data, dict) else {}


class ProviderStatusError(EngineError):
    """An HTTP status >= 400 that a native provider's SDK raised, with the decision its
    classifier made (the message, the parameter named, the Retry-After hint)."""

    def __init__(self, decision: ErrorDecision) -> None:
        super().__init__(decision.message)
        self.status = int(decision.status or 0)
        self.decision, self.kind = decision, decision.kind


def error_for(decision: ErrorDecision) -> EngineError:
    """The engine's error for a classifier's decision (raise it ``from`` the SDK's exception:
    ``probe`` reads the cause, e.g. a refused connection, from the chain)."""
    if decision.status is not None:
        return ProviderStatusError(decision)
    cls = {"connection": ConnectionFailed, "timeout": RequestTimeout,
           "malformed": MalformedResponse}.get(decision.cause or "", EngineError)
    error = cls(decision.message)
    error.decision, error.kind = decision, decision.kind
    return error


def classify(exc: BaseException) -> ErrorDecision:
    """The decision attached to ``exc`` where a classifier made one; else 429, 408/409, 5xx,
    timeouts, dropped connections and garbled bodies are retried (``retryable_status``), and
    every other status (400, 401, 403, 404, 422...) and anything unexpected is that item's
    error (a transport's ``decide`` may make it ``fatal`` or ``parameter``)."""
    decision = exc.decision if isinstance(exc, EngineError) else None
    if decision is not None:
        return decision
    if isinstance(exc, HTTPStatusError):
        if retryable_status(exc.status):
            return ErrorDecision("retry", str(exc), exc.status, exc.retry_after_s)
        return ErrorDecision("item", str(exc), exc.status, kind=exc.kind)
    if isinstance(exc, RequestTimeout):
        return ErrorDecision("retry", str(exc), cause="timeout")
    if isinstance(exc, ConnectionFailed):
        return ErrorDecision("retry", str(exc), cause="connection")
    if isinstance(exc, MalformedResponse):
        return ErrorDecision("retry", str(exc), cause="malformed")
    return ErrorDecision("item", f"{type(exc).__name__}: {exc}",
                         kind=exc.kind if isinstance(exc, EngineError) else None)
