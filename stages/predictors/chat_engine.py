"""The shared chat engine: items in, chat calls out, replies back into predictions.

A backend is a ``ChatPredictor`` subclass (its ``defaults`` and its transport); a
``ChatTransport`` only sends one request. Every backend (``openai`` in ``openai_chat``,
``local`` in ``local_model``) shares the prompt templates, the ``\\boxed{}`` extraction, the
response cache, the concurrency, the progress bar and the RIMO-P chaining:

* RIMO-N: one call; the prediction is the content of the last balanced ``\\boxed{}`` of the
  reply, stripped. A reply with no such box is still status ``ok``, with prediction ``""``
  (never equal to an integer gold, so scored wrong) and ``details.extraction == "none"``.
* RIMO-P (the paper's protocol): one call per sub-problem, in order; call k shows the problem,
  parts 1..k-1 with the model's own proofs as already proved facts, then part k. The
  prediction is the list of the model's replies, stripped. If a part fails for good the item is
  status ``error`` (the parts done so far stay in the cache and in ``details.parts``).
* ``n > 1`` samples: every sample is kept in ``details.samples``; the first one is the
  prediction (and, for RIMO-P, the one passed forward to later parts).
* A request that still fails after its retries (``TransportError``) marks only its item
  ``error``; a transport raises ``StageError`` for configuration failures that would fail every
  item, and that stops the stage.

Details are a pure function of the (cached) replies, so re-running over a warm cache writes
byte-identical predictions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, TypeVar

from stages import __version__
from stages.core.errors import StageError
from stages.core.items import Item
from stages.core.tracks import TRACK_N, TRACK_P
from stages.predictors import extract
from stages.predictors.base import STATUS_ERROR, Prediction, Predictor
from stages.predictors.breaker import DEFAULT_WINDOW, CircuitBreaker
from stages.predictors.cache import ResponseCache, request_key
from stages.predictors.progress import DEFAULT_STALL_WARNING_S, Progress
from stages.predictors.prompting import rimo_n_messages, rimo_p_messages, template_hashes

PROTOCOL = "rimo-chat-v1"  # bump when the way items become calls changes
T = TypeVar("T")


# --------------------------------------------------------------------------------------------
# Transport interface
# --------------------------------------------------------------------------------------------
@dataclass
class ChatReply:
    """One completed request: a text per sample, plus what the server said about it."""

    texts: list[str]
    finish_reasons: list[str | None]
    usage: dict[str, int]
    model: str | None
    latency_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChatReply:
        return cls(texts=list(data["texts"]), finish_reasons=list(data["finish_reasons"]),
                   usage=dict(data.get("usage") or {}), model=data.get("model"),
                   latency_s=float(data.get("latency_s", 0.0)))


def int_usage(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """The integer counters of a server's usage record (nested breakdowns dropped)."""
    return {k: v for k, v in (usage or {}).items() if isinstance(v, int)}


class TransportError(Exception):
    """A request that failed for good. The message is safe to record (no secrets).

    ``transient``: the failure was the server or the network (connection, timeout, 5xx), not
    this request; the circuit breaker counts only those.
    """

    request_sha256: str | None = None
    transient: bool = False


class ChatTransport(ABC):
    concurrency: int = 1

    @abstractmethod
    def endpoint(self) -> dict[str, Any]:
        """What answers the requests (server or model file); part of every cache key."""

    @abstractmethod
    def request(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """The complete request for these messages: model, messages, sampling parameters."""

    @abstractmethod
    async def send(self, request: dict[str, Any]) -> ChatReply:
        """Send one request (retrying as the transport sees fit) or raise ``TransportError``."""

    async def probe(self) -> None:  # noqa: B027 - optional hook
        """Called once before the first request is sent; raise ``StageError`` if the endpoint
        is certainly unreachable (see ``probe``)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        pass


# --------------------------------------------------------------------------------------------
# Configuration helpers
# --------------------------------------------------------------------------------------------
def resolve_config(name: str, config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise StageError(f"params.yaml: predict.{name} has unknown keys {unknown}; "
                         f"known: {sorted(defaults)}")
    return {**defaults, **config}


def require(cond: bool, message: str) -> None:
    if not cond:
        raise StageError(f"params.yaml: {message}")


# Knobs that change speed or robustness, never a reply: kept out of the fingerprint.
OPERATIONAL_KEYS = frozenset({"timeout_s", "max_retries", "backoff_initial_s", "backoff_max_s",
                              "concurrency", "cache_dir", "api_key_env", "n_threads",
                              "model_cache_dir", "model_path", "breaker_window",
                              "stall_warning_s"})


# --------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------
class ChatPredictor(Predictor):
    """Shared engine. Subclasses set ``defaults`` and build their transport."""

    defaults: ClassVar[dict[str, Any]]

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.settings = resolve_config(self.name, self.config, self.defaults)
        s = self.settings
        require(s["system_prompt"] is None or isinstance(s["system_prompt"], str),
                f"predict.{self.name}.system_prompt must be a string or null")
        require(s["cache_dir"] is None or isinstance(s["cache_dir"], str),
                f"predict.{self.name}.cache_dir must be a path or null (no cache)")

    @abstractmethod
    def make_transport(self) -> ChatTransport: ...

    def endpoint_identity(self) -> dict[str, Any]:
        """The part of the transport's endpoint that belongs in the fingerprint."""
        return {}

    def identity(self) -> dict[str, Any]:
        params = {k: v for k, v in self.settings.items() if k not in OPERATIONAL_KEYS}
        return {"backend": self.name, "params": params, "templates": template_hashes(),
                "protocol": PROTOCOL, "extractor": extract.VERSION, "version": __version__,
                **self.endpoint_identity()}

    def predict(self, items: Sequence[Item]) -> list[Prediction]:
        return _run_coroutine(self._predict_all(list(items)))

    # -- the async core ----------------------------------------------------------------------
    async def _predict_all(self, items: list[Item]) -> list[Prediction]:
        for item in items:
            if item.track not in (TRACK_N, TRACK_P):
                raise StageError(f"{item.problem_id}: unknown track {item.track!r}")
        transport = self.make_transport()
        run = _Run(self, transport, ResponseCache(self.settings["cache_dir"]), items)
        try:
            return await run.all()
        finally:
            run.close()
            await transport.aclose()


def calls_needed(items: Iterable[Item]) -> int:
    """Requests a run asks for: one per RIMO-N item, one per sub-problem of a RIMO-P item."""
    return sum(1 if it.track == TRACK_N else len(it.sub_problems) for it in items)


class _Run:
    """One ``predict`` call: the semaphore, the progress bar and the counters."""

    def __init__(self, predictor: ChatPredictor, transport: ChatTransport,
                 cache: ResponseCache, items: list[Item]) -> None:
        self.transport, self.cache, self.items = transport, cache, items
        self.system_prompt: str | None = predictor.settings["system_prompt"]
        self.semaphore = asyncio.Semaphore(max(1, transport.concurrency))
        self.label = f"predict[{predictor.name}]"
        settings = predictor.settings
        self.bar = Progress(calls_needed(items), self.label,
                            settings.get("stall_warning_s", DEFAULT_STALL_WARNING_S))
        self.breaker = CircuitBreaker(settings.get("breaker_window", DEFAULT_WINDOW), self.label)
        self.sent = self.errors = 0
        self.inflight: dict[str, asyncio.Future[ChatReply]] = {}
        self.probed: asyncio.Future[None] | None = None
        self.started = time.monotonic()

    async def all(self) -> list[Prediction]:
        self.bar.start()
        try:
            async with asyncio.TaskGroup() as group:  # a StageError cancels the other items
                # Longest chains first (the semaphore is FIFO): a 4-part RIMO-P item started
                # last would leave the run waiting 4 round trips on one connection at the end.
                order = sorted(self.items, key=lambda it: -calls_needed([it]))
                started = {id(it): group.create_task(self.one(it)) for it in order}
                tasks = [started[id(it)] for it in self.items]
        except ExceptionGroup as failed:
            stage_errors = [e for e in failed.exceptions if isinstance(e, StageError)]
            raise (stage_errors or failed.exceptions)[0] from None
        return [t.result() for t in tasks]

    def close(self) -> None:
        self.bar.close()
        print(f"{self.label}: {len(self.items)} items, {self.cache.hits} cached replies, "
              f"{self.sent} requests sent, {self.errors} items failed, "
              f"{time.monotonic() - self.started:.1f}s", file=sys.stderr)

    async def one(self, item: Item) -> Prediction:
        # One slot per item: RIMO-P parts run in order inside it, items run in parallel.
        async with self.semaphore:
            pred = await (self.rimo_n(item) if item.track == TRACK_N else self.rimo_p(item))
        if pred.status == STATUS_ERROR:
            self.errors += 1
        return pred

    async def call(self, messages: list[dict[str, str]]) -> tuple[ChatReply, str]:
        request = self.transport.request(messages)
        payload = {"endpoint": self.transport.endpoint(), "request": request}
        key = request_key(payload)
        reply = self.cached(key, payload)
        if reply is None:
            reply = await self.single_flight(key, payload, request)
        self.bar.update(1)
        return reply, key

    async def single_flight(self, key: str, payload: dict[str, Any],
                            request: dict[str, Any]) -> ChatReply:
        """Two items asking the very same thing share one request. The first one sends it in
        its own task (no extra task per request); the others wait on a future."""
        shared = self.inflight.get(key)
        if shared is not None:
            return await asyncio.shield(shared)
        shared = self.inflight[key] = asyncio.get_running_loop().create_future()
        try:
            reply = await self.fetch(key, payload, request)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                shared.cancel()
            else:
                shared.set_exception(exc)
                shared.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self.inflight[key]
        shared.set_result(reply)
        return reply

    def cached(self, key: str, payload: dict[str, Any]) -> ChatReply | None:
        entry = self.cache.get(key, payload)
        if entry is None:
            return None
        try:
            reply = ChatReply.from_json(entry)
        except (KeyError, TypeError, ValueError):
            return None  # an entry of the right shape but wrong content: refetch
        return reply if reply.texts else None

    async def fetch(self, key: str, payload: dict[str, Any],
                    request: dict[str, Any]) -> ChatReply:
        if self.probed is None:  # only a run that sends anything probes: a warm cache needs none
            self.probed = asyncio.ensure_future(self.transport.probe())
        if not self.probed.done():
            await asyncio.shield(self.probed)
        self.probed.result()  # re-raises the probe's StageError
        self.sent += 1
        token = self.bar.begin()
        try:
            reply = await self.transport.send(request)
        except TransportError as exc:
            exc.request_sha256 = key
            self.bar.end(token)
            self.breaker.failure(str(exc), transient=exc.transient)
            raise
        self.bar.end(token)
        self.breaker.success()
        # fsync off the event loop; awaited, so an item is done only once its reply is durable
        await asyncio.to_thread(self.cache.put, key, payload, reply.to_json())
        return reply

    async def rimo_n(self, item: Item) -> Prediction:
        try:
            reply, key = await self.call(rimo_n_messages(item, self.system_prompt))
        except TransportError as exc:
            self.bar.update(1)
            return Prediction(item.track, item.problem_id, None, STATUS_ERROR, str(exc),
                              {"request_sha256": exc.request_sha256})
        answers = [extract.extract_boxed(t) for t in reply.texts]
        details = _reply_details(reply, key)
        details["extraction"] = "none" if answers[0] is None else "boxed"
        if len(reply.texts) > 1:
            details["samples"] = [
                {"raw_text": t, "finish_reason": f, "answer": a}
                for t, f, a in zip(reply.texts, reply.finish_reasons, answers, strict=True)
            ]
        return Prediction(item.track, item.problem_id, answers[0] or "", details=details)

    async def rimo_p(self, item: Item) -> Prediction:
        proved: list[str] = []
        parts: list[dict[str, Any]] = []
        total = len(item.sub_problems)
        for index in range(total):
            messages = rimo_p_messages(item, index, proved, self.system_prompt)
            try:
                reply, key = await self.call(messages)
            except TransportError as exc:
                self.bar.update(total - index)  # the remaining parts will not be asked
                return Prediction(item.track, item.problem_id, None, STATUS_ERROR,
                                  f"part {index + 1} of {total}: {exc}",
                                  {"parts": parts, "failed_request_sha256": exc.request_sha256})
            part = _reply_details(reply, key)
            if len(reply.texts) > 1:
                part["samples"] = [{"raw_text": t, "finish_reason": f}
                                   for t, f in zip(reply.texts, reply.finish_reasons, strict=True)]
            parts.append(part)
            proved.append(reply.texts[0].strip())
        return Prediction(item.track, item.problem_id, proved, details={"parts": parts})


def _reply_details(reply: ChatReply, key: str) -> dict[str, Any]:
    # Latency is kept with the reply in the cache entry named by request_sha256, not here:
    # wall-clock time would make the predictions differ byte-wise between identical runs.
    return {"request_sha256": key, "raw_text": reply.texts[0],
            "finish_reason": reply.finish_reasons[0], "usage": reply.usage,
            "model": reply.model}


def _run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Called from inside a running loop (a notebook): give the coroutine a loop of its own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
