"""What the chat engine asks of a backend: a ``ChatTransport`` sends one request and returns a
``ChatReply`` or raises ``TransportError``. Kept apart from the engine so that a transport
(``openai_chat``, ``local_model``, ``--estimate``) imports only this.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from rimo_eval.chat.reply_flags import UNICODE_REPAIRED, USAGE_DROPPED, USAGE_LIMIT
from rimo_eval.io.surrogates import is_valid, valid_text, valid_value


@dataclass
class ChatReply:
    """One completed request: a text per choice, plus what the server said about it.

    Every transport (and the cache, reading an entry back) builds one, so this is where model
    text enters the engine: ``__post_init__`` makes every string valid Unicode
    (``rimo_eval.io.surrogates``: each lone surrogate becomes U+FFFD) and adds the flag
    ``unicode_repaired`` when it changed one. ``flags`` name what was done to the reply on its
    way in (``unicode_repaired``, ``redacted``, ``usage_dropped``: a usage counter that is no
    token count is left out); they are cached with it and become the reply's diagnostic flags
    in score.
    """

    texts: list[str]
    finish_reasons: list[str | None]
    usage: dict[str, int]
    model: str | None
    latency_s: float
    reasoning: list[str | None] = field(default_factory=list)  # the server's reasoning field
    flags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not all(type(v) is int and 0 <= v < USAGE_LIMIT for v in self.usage.values()):
            self.usage = {k: v for k, v in self.usage.items()
                          if type(v) is int and 0 <= v < USAGE_LIMIT}
            self.flag(USAGE_DROPPED)
        strings = [*self.texts, *self.reasoning, *self.finish_reasons, self.model, *self.usage]
        if all(not isinstance(v, str) or is_valid(v) for v in strings):
            return  # nearly always: nothing to mend, nothing copied
        repaired = False

        def valid(value: Any) -> Any:
            nonlocal repaired
            fixed, changed = valid_value(value)
            repaired |= changed
            return fixed

        self.texts = [valid(t) for t in self.texts]
        self.reasoning = [valid(r) for r in self.reasoning]
        self.finish_reasons = [valid(f) for f in self.finish_reasons]
        self.model = valid(self.model)
        self.usage = valid(self.usage)  # its keys are the server's
        if repaired:
            self.flag(UNICODE_REPAIRED)

    def flag(self, name: str) -> None:
        if name not in self.flags:
            self.flags.append(name)

    def to_json(self) -> dict[str, Any]:
        # ``asdict`` by hand: its recursive deep copy was 60 µs of every request (issue 20).
        data = {"texts": list(self.texts), "finish_reasons": list(self.finish_reasons),
                "usage": dict(self.usage), "model": self.model, "latency_s": self.latency_s,
                "reasoning": list(self.reasoning)}
        if self.flags:  # only then: a clean reply's entry is what it always was
            data["flags"] = list(self.flags)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChatReply:
        return cls(texts=list(data["texts"]), finish_reasons=list(data["finish_reasons"]),
                   usage=dict(data.get("usage") or {}), model=data.get("model"),
                   latency_s=float(data.get("latency_s", 0.0)),
                   reasoning=list(data.get("reasoning") or []),
                   flags=[f for f in data.get("flags") or [] if isinstance(f, str)])


def int_usage(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    """The counters of a server's usage record (its numbers: nested records and nulls are no
    counters), plus the reasoning tokens that OpenAI and vLLM nest under
    ``completion_tokens_details``. A number that is no token count is ``ChatReply``'s to drop
    and flag, not this function's to drop unsaid."""
    out = {k: v for k, v in (usage or {}).items() if isinstance(v, int | float)}
    nested = (usage or {}).get("completion_tokens_details")
    if isinstance(nested, Mapping) and isinstance(nested.get("reasoning_tokens"), int | float):
        out["reasoning_tokens"] = nested["reasoning_tokens"]
    return out


class TransportError(Exception):
    """A request that failed for good. The message is safe to record (no secrets).

    ``transient``: the failure was the server or the network (connection, timeout, 5xx), not
    this request; the circuit breaker counts only those.
    """

    request_sha256: str | None = None
    transient: bool = False

    def __init__(self, message: str, kind: str | None = None) -> None:
        # A server's error text can hold a lone surrogate as well, and the message is recorded.
        message, repaired = valid_text(message)
        super().__init__(message)
        self.kind = kind  # e.g. "context_length"; recorded as details.error_kind
        self.flags = [UNICODE_REPAIRED] if repaired else []


class Superseded(Exception):
    """Another process has stored this request's reply or taken the request over (this one
    stalled past its lease): it is not sent again; the session reads or waits for that reply."""


# Set by the session while it sends a request it holds the lease of: a retrying transport calls
# it before every retry (a process resumed after a long SIGSTOP sees its requests time out at
# once, and must not send them a third time). Raises ``Superseded``.
RETRY_GUARD: ContextVar[Callable[[], None] | None] = ContextVar("rimo_retry_guard",
                                                               default=None)


class ChatTransport(ABC):
    concurrency: int = 1

    @abstractmethod
    def endpoint(self) -> dict[str, Any]:
        """What answers the requests (server or model file); part of every cache key."""

    @abstractmethod
    def request(self, messages: list[dict[str, str]], sample: int = 0) -> dict[str, Any]:
        """The complete request for these messages: model, messages, sampling parameters.

        ``sample`` is the 0-based sample index; a transport with a seed offsets it by the index
        so that k samples of a seeded model are not k copies of one."""

    @abstractmethod
    async def send(self, request: dict[str, Any]) -> ChatReply:
        """Send one request (retrying as the transport sees fit) or raise ``TransportError``."""

    async def send_keyed(self, key: str, payload: dict[str, Any], request: dict[str, Any]
                         ) -> ChatReply:
        """``send`` told the request's cache key and payload (what the session calls). A
        transport that must recognise a request across runs (the batch transport's durable
        records) overrides this; the others just send."""
        return await self.send(request)

    # -- what the server serves (``rimo_eval.chat.served``): part of every cache key ---------
    def served_name(self) -> str | None:
        """The model name the requests ask a server for, when that server can be asked what
        it serves under it (``served_identity``); None (the default): no server to ask."""
        return None

    async def served_identity(self) -> dict[str, Any] | None:
        """What the server reports about the weights behind ``served_name`` beyond the name
        (``served.identity``), asked once before the first lookup; None when it could not be
        asked (unreachable)."""
        return {}

    async def probe(self) -> None:  # noqa: B027 - optional hook
        """Called once before the first request is sent; raise ``StageError`` if the endpoint
        is certainly unreachable (see ``probe``)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        pass


def cache_payload(transport: ChatTransport, request: dict[str, Any],
                  sample: int) -> dict[str, Any]:
    """What the cache key hashes. Sample 0 has no index, so a k = 1 cache stays valid."""
    payload = {"endpoint": transport.endpoint(), "request": request}
    return {**payload, "sample": sample} if sample else payload
