"""The engine's retry loop, shared by every transport that talks to a remote API (the
OpenAI-compatible one, the native Anthropic and Gemini ones), in inspect_ai's shape
(``ModelAPI.should_retry`` and one retry loop for every provider) with richer outcomes.

A subclass sends one attempt (``_attempt``), raising only the engine's own errors
(``rimo_eval.chat.errors``); ``decide`` turns a failed attempt into the one ``ErrorDecision``
(``errors.classify``, plus what the transport knows: the OpenAI transport's 401/403/404 and
rejected parameters), attached to the error. This loop retries the ``retry`` decisions, with
full jitter, honouring ``Retry-After`` up to ``backoff_max_s``, and ``final_error`` turns
what still fails into ``TransportError`` (``item``: that item's error) or ``StageError``
(``fatal``, ``parameter``: a configuration that fails every item; once one is raised the
transport sends nothing more). The batch transports read their results through the same
``decide`` and ``final_error``. Replies are scrubbed of the API key before the cache sees
them.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from rimo_eval.chat import probe
from rimo_eval.chat.errors import ConnectionFailed, EngineError, ErrorDecision, classify
from rimo_eval.chat.redact import Redactor
from rimo_eval.chat.reply_flags import REDACTED
from rimo_eval.chat.transport import RETRY_GUARD, ChatReply, ChatTransport, TransportError
from rimo_eval.errors import StageError


def _retryable(exc: BaseException) -> bool:
    # Only the engine's errors, decided by ``_try``; a StageError or Superseded ends the loop.
    return isinstance(exc, EngineError) and classify(exc).retryable


class RetryingTransport(ChatTransport):
    """``section``: the params section (errors name its keys); ``base_url``: where requests
    go (errors name it)."""

    def __init__(self, *, section: str, base_url: str, max_retries: int,
                 backoff_initial_s: float, backoff_max_s: float, redact: Redactor) -> None:
        self.section, self.base_url = section, base_url
        self._attempts = max_retries + 1
        self._wait = wait_random_exponential(multiplier=float(backoff_initial_s),
                                             max=float(backoff_max_s))
        self._backoff_max = float(backoff_max_s)
        self._redact = redact
        self._fatal: StageError | None = None

    @abstractmethod
    async def _attempt(self, request: dict[str, Any]) -> ChatReply:
        """One attempt; raises only ``EngineError`` (or ``StageError``)."""

    def decide(self, exc: EngineError, request: dict[str, Any]) -> ErrorDecision:
        """What a failed attempt of ``request`` means (``errors.classify`` by default); a
        transport that can tell a configuration error from an item's overrides this."""
        return classify(exc)

    def final_error(self, exc: EngineError, decision: ErrorDecision, attempts: int
                    ) -> StageError | TransportError:
        """What a request that failed for good raises: ``StageError`` for a configuration
        that fails every item (``fatal``, ``parameter``, naming the params key), else that
        item's ``TransportError``."""
        if decision.action in ("fatal", "parameter"):
            said = self._redact(decision.message)[:300]
            where = f"{self.section}: {self.base_url}"
            if decision.action == "fatal":
                return StageError(f"{where}: {said}")
            return StageError(
                f"{where}: the server rejects the request parameter '{decision.param}'; "
                f"change or null {decision.params_key} in params.yaml (null: not sent). "
                f"Server said: {said}")
        return self._failed(exc, decision, attempts)

    def _backoff(self, state: RetryCallState) -> float:
        # Full jitter (tenacity's random exponential) spreads 64 workers that hit the same 429
        # burst; a Retry-After hint is honoured up to backoff_max_s.
        wait = self._wait(state)
        exc = state.outcome.exception() if state.outcome else None
        hint = classify(exc).retry_after_s if exc is not None else None  # a retry's decision
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
        # The first attempt runs outside tenacity: building its loop cost about 60 µs of every
        # request, almost all of which need no retry (issue 20).
        try:
            return await self._try(request)
        except EngineError as exc:
            first: EngineError | None = exc
        attempt = 1
        try:
            async for retrying in AsyncRetrying(stop=stop_after_attempt(self._attempts),
                                                wait=self._backoff, reraise=True,
                                                retry=retry_if_exception(_retryable)):
                with retrying:
                    attempt = retrying.retry_state.attempt_number
                    if first is not None:  # attempt 1, made above: tenacity decides on it
                        failed, first = first, None
                        raise failed
                    guard = RETRY_GUARD.get()
                    if guard is not None:  # still this process's request? (else Superseded)
                        guard()
                    return await self._try(request)
        except EngineError as exc:
            raise self.final_error(exc, classify(exc), attempt) from None
        raise AssertionError("unreachable")  # AsyncRetrying either returns or raises

    async def _try(self, request: dict[str, Any]) -> ChatReply:
        """One attempt; a failure leaves with its decision attached."""
        try:
            return self._scrub(await self._attempt(request))
        except EngineError as exc:
            exc.decision = self.decide(exc, request)
            raise

    def _scrub(self, reply: ChatReply) -> ChatReply:
        """A server may echo the key in any string field; none of them may reach the cache.
        A reply this changes is flagged ``redacted``: its text is graded."""
        changed = False

        def clean(value: str | None) -> str | None:
            nonlocal changed
            if value is None:
                return None
            out = self._redact.model_text(value)
            changed |= out != value
            return out

        reply.texts = [clean(t) or "" for t in reply.texts]
        reply.finish_reasons = [clean(f) for f in reply.finish_reasons]
        reply.model = clean(reply.model)
        reply.reasoning = [clean(r) for r in reply.reasoning]
        if changed:
            reply.flag(REDACTED)
        return reply

    def _failed(self, exc: EngineError, decision: ErrorDecision, attempts: int
                ) -> TransportError:
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, ConnectionFailed):  # "connection error" alone says nothing
            cause = probe.connection_cause(exc, self.base_url)
            text += f" ({cause or f'{probe.root_cause(exc)} at {self.base_url}'})"
        error = TransportError(self._redact(f"failed after {attempts} attempt(s): {text}")[:500],
                               decision.kind)
        error.transient = decision.retryable
        return error
