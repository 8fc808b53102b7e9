"""What the native provider transports (``anthropic/``, ``gemini/``) share: one SDK call per
attempt, its failure read by the provider's classifier (``translate.classify_error``) and
raised as the engine's own error with that ``ErrorDecision`` attached (``errors.error_for``),
so that ``retrying`` (retries, Retry-After, the breaker's transient count, the final error) and
``probe`` treat it as they treat the OpenAI transport's. The SDKs' own retries are off.

A parsed reply with an ``error_kind`` (a refusal or blocked candidate: ``blocked``; no
content: ``empty``, retried first) is that item's error. ``fatal`` decisions (401, 403, 404, a
spend cap) and ``parameter`` decisions (a 400 naming a request parameter) stop the stage,
naming the params key (``RetryingTransport.final_error``); everything goes through the key's
``Redactor`` first.

``timeout_s`` is the deadline of the whole call here too: the SDKs' own timeouts (httpx's) are
per read, so a server trickling a byte at a time would hold a call past it; the call is
cancelled at the deadline and fails as a ``RequestTimeout`` (retried, as a timeout is). The
SDKs read and decode the body themselves: ``max_reply_bytes`` is counted in the httpx
transport they are given (``capped_http``), whose ``BadReply`` the SDK wraps as a connection
error; ``_guard`` takes it out again (that item's ``reply_too_large``, never retried). Their
JSON depth errors reach the classifier as any other exception (that item's error).
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from rimo_eval.chat import probe
from rimo_eval.chat.api_key import key_source
from rimo_eval.chat.capped_http import Cap, bad_reply_in
from rimo_eval.chat.errors import (
    Action,
    ErrorDecision,
    MalformedResponse,
    RequestTimeout,
    error_for,
)
from rimo_eval.chat.redact import Redactor
from rimo_eval.chat.retrying import RetryingTransport
from rimo_eval.chat.transport import ChatReply
from rimo_eval.params.chat import NativeChatParams

_CONNECT_TIMEOUT_S = 10.0


class NativeTransport(RetryingTransport):
    """Subclasses hold the SDK client and say how a request is sent (``_call``), read
    (``_parse``) and how its failures are classified (``_classify``)."""

    def __init__(self, params: NativeChatParams, section: str, base_url: str, key: str
                 ) -> None:
        super().__init__(section=section, base_url=base_url, max_retries=params.max_retries,
                         backoff_initial_s=params.backoff_initial_s,
                         backoff_max_s=params.backoff_max_s,
                         redact=Redactor(key, key_source(params.api_key_env, section)))
        self.concurrency = params.concurrency
        self._timeout_s = float(params.timeout_s)
        self._connect_s = min(_CONNECT_TIMEOUT_S, self._timeout_s)
        self.cap = Cap(params.max_reply_bytes, f"{section}.max_reply_bytes")

    @abstractmethod
    async def _call(self, request: dict[str, Any]) -> Any:
        """The SDK's reply object for one request."""

    @abstractmethod
    def _parse(self, response: Any) -> dict[str, Any]:
        """``translate.parse_*``: text, reasoning, finish_reason, usage, model, error_kind."""

    @abstractmethod
    def _classify(self, exc: BaseException, request: Mapping[str, Any]) -> ErrorDecision: ...

    async def _guard(self, call: Awaitable[Any], request: Mapping[str, Any]) -> Any:
        try:
            return await call
        except Exception as exc:
            bad = bad_reply_in(exc)
            if bad is not None:
                raise bad from exc
            raise error_for(self._classify(exc, request)) from exc

    async def _attempt(self, request: dict[str, Any]) -> ChatReply:
        started = time.monotonic()
        response = await self._within(self._timeout_s, self._call(request), request)
        return self.reply_of(response, time.monotonic() - started)

    async def _within(self, seconds: float, call: Awaitable[Any], request: Mapping[str, Any]
                      ) -> Any:
        """``call`` (guarded) cancelled at ``seconds``: ``RequestTimeout`` then."""
        try:
            async with asyncio.timeout(seconds):
                return await self._guard(call, request)
        except TimeoutError:  # only the deadline's: _guard turns the SDK's into errors
            # The cause said is the deadline, not the cancellation it made inside the SDK.
            raise RequestTimeout("timed out") from TimeoutError(
                f"no complete reply within {seconds:g}s")

    def reply_of(self, response: Any, latency_s: float) -> ChatReply:
        """The reply in an SDK response (online, or a batch's result), or the engine's error
        for it: a refusal (``item``), no content (``retry``), a malformed shape."""
        try:
            parsed = self._parse(response)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise MalformedResponse(f"unexpected response shape: {exc!r}") from None
        if parsed["error_kind"]:
            action: Action = "retry" if parsed["retryable"] else "item"
            raise error_for(ErrorDecision(action, parsed["error"], kind=parsed["error_kind"],
                                          cause="malformed" if parsed["retryable"] else None))
        return ChatReply([parsed["text"]], [parsed["finish_reason"]], parsed["usage"],
                         parsed["model"], latency_s, [parsed["reasoning"]])

    async def _probe_with(self, call: Callable[[], Awaitable[Any]]) -> None:
        wait = min(probe.PROBE_TIMEOUT_S, self._timeout_s)
        await probe.probe_endpoint(lambda: self._within(wait, call(), {}), self.base_url, wait,
                                   self.section)
