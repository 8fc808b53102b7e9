"""The shared chat engine: items in, chat calls out, replies back into predictions.

A backend is a ``ChatPredictor`` subclass (its ``defaults`` and its transport); a
``ChatTransport`` only sends one request. Every backend (``openai`` in ``openai_chat``,
``local`` in ``local_model``) shares the prompt templates, the ``\\boxed{}`` extraction, the
response cache, the concurrency, the progress bar and the RIMO-P chaining:

* ``predict.samples: k``: every item gets k independent samples, each its own request(s) with
  the sample index in the cache key (sample 0's key is the key of a k = 1 run, so a k = 1 cache
  stays warm). One ``Prediction`` per (item, sample), ``sample`` 0-based.
* RIMO-N: one call; the answer text is the reply after any leading ``<think>…</think>`` block
  (``think_split``); the prediction is the content of its last balanced ``\\boxed{}``. A reply
  with no box is status ``ok`` with prediction ``""`` and ``details.extraction`` ``"none"``, or
  ``"truncated"`` when the server cut it off (``finish_reason: length``).
* RIMO-P (the paper's protocol): one call per sub-problem, in order; call k shows the problem,
  parts 1..k-1 with the model's own proofs (sample j's own, never reasoning text) as already
  proved facts, then part k. If a part fails for good the sample is status ``error``, with
  ``details.error_kind`` (``"context_length"`` for a prompt over the context window).
* A request that still fails after its retries (``TransportError``) marks only its sample
  ``error``; a transport raises ``StageError`` for configuration failures that would fail every
  item, and that stops the stage. Failing fast: the transport's ``probe`` runs once before the
  first request is sent (``probe``), ``CircuitBreaker`` stops the stage after
  ``breaker_window`` transport failures in a row (``breaker``), and the progress bar shows the
  requests in flight with a stall warning (``progress``).

The transport interface is in ``transport``, the reading of a reply (reasoning apart, extraction
status, usage) in ``replies``. Details are a pure function of the (cached) replies, so
re-running over a warm cache writes byte-identical predictions; run facts (requests sent, cache
hits) go to ``run_stats``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import time
from abc import abstractmethod
from collections import Counter
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, ClassVar, TypeVar

from stages import __version__
from stages.core.errors import ConfigError, StageError
from stages.core.items import Item
from stages.core.tracks import TRACK_N, TRACK_P
from stages.predictors import extract
from stages.predictors.base import STATUS_ERROR, Prediction, Predictor
from stages.predictors.breaker import DEFAULT_WINDOW, CircuitBreaker
from stages.predictors.cache import SYNC_EVERY_S, ResponseCache, request_key
from stages.predictors.progress import DEFAULT_STALL_WARNING_S, Progress
from stages.predictors.prompting import rimo_n_messages, rimo_p_messages, template_hashes
from stages.predictors.replies import USAGE_KEYS, read_reply, sum_parts
from stages.predictors.transport import ChatReply, ChatTransport, TransportError, cache_payload

PROTOCOL = "rimo-chat-v1"  # bump when the way items become calls changes
THINK_OFF = {"enabled": False, "open": "<think>", "close": "</think>"}
T = TypeVar("T")


# --------------------------------------------------------------------------------------------
# Configuration helpers
# --------------------------------------------------------------------------------------------
def resolve_config(name: str, config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise ConfigError(f"params.yaml: predict.{name} has unknown keys {unknown}; "
                         f"known: {sorted(defaults)}")
    return {**defaults, **config}


def require(cond: bool, message: str) -> None:
    if not cond:
        raise ConfigError(f"params.yaml: {message}")


def resolve_think_split(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        return dict(THINK_OFF)
    require(isinstance(value, dict) and set(value) <= set(THINK_OFF),
            f"predict.{name}.think_split must be a mapping with keys {sorted(THINK_OFF)}")
    merged = {"enabled": True, "open": "<think>", "close": "</think>", **value}
    require(isinstance(merged["enabled"], bool), f"predict.{name}.think_split.enabled: bool")
    require(all(isinstance(merged[k], str) and merged[k] for k in ("open", "close")),
            f"predict.{name}.think_split.open and .close must be non-empty strings")
    return merged


# Knobs that change speed or robustness, never a reply: kept out of the fingerprint.
OPERATIONAL_KEYS = frozenset({"timeout_s", "max_retries", "backoff_initial_s", "backoff_max_s",
                              "concurrency", "cache_dir", "api_key_env", "n_threads",
                              "model_cache_dir", "model_path", "price_per_mtok",
                              "breaker_window", "stall_warning_s"})


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
        self.think = resolve_think_split(self.name, s.get("think_split"))
        self.run_stats: dict[str, Any] = {}

    @abstractmethod
    def make_transport(self) -> ChatTransport: ...

    def offline_transport(self) -> ChatTransport:
        """A transport for ``--estimate``: builds requests and keys, writes nothing."""
        return self.make_transport()

    def endpoint_identity(self) -> dict[str, Any]:
        """The part of the transport's endpoint that belongs in the fingerprint."""
        return {}

    def identity(self) -> dict[str, Any]:
        params = {k: v for k, v in self.settings.items() if k not in OPERATIONAL_KEYS}
        ident = {"backend": self.name, "params": params, "templates": template_hashes(),
                 "protocol": PROTOCOL, "extractor": extract.VERSION, "version": __version__,
                 **self.endpoint_identity()}
        return {**ident, "samples": self.samples} if self.samples != 1 else ident

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
            self.run_stats = run.close()
            await transport.aclose()


def calls_needed(items: Iterable[Item], samples: int = 1) -> int:
    """Requests a run asks for: one per RIMO-N item, one per sub-problem of a RIMO-P item,
    for each of the k samples."""
    return samples * sum(1 if it.track == TRACK_N else len(it.sub_problems) for it in items)


class _Run:
    """One ``predict`` call: the semaphore, the progress bar and the counters."""

    def __init__(self, predictor: ChatPredictor, transport: ChatTransport,
                 cache: ResponseCache, items: list[Item]) -> None:
        self.transport, self.cache, self.items = transport, cache, items
        self.samples = predictor.samples
        self.think = predictor.think
        self.system_prompt: str | None = predictor.settings["system_prompt"]
        self.semaphore = asyncio.Semaphore(max(1, transport.concurrency))
        self.label = f"predict[{predictor.name}]"
        settings = predictor.settings
        self.bar = Progress(calls_needed(items, self.samples), self.label,
                            settings.get("stall_warning_s", DEFAULT_STALL_WARNING_S))
        self.breaker = CircuitBreaker(settings.get("breaker_window", DEFAULT_WINDOW), self.label)
        self.errors = 0
        self.sent: Counter[str] = Counter()  # per track
        self.hits: Counter[str] = Counter()
        self.inflight: dict[str, asyncio.Future[ChatReply]] = {}
        self.probed: asyncio.Future[None] | None = None
        self.started = time.monotonic()

    async def all(self) -> list[Prediction]:
        self.bar.start()
        syncer = asyncio.create_task(self.sync_every(SYNC_EVERY_S))
        try:
            async with asyncio.TaskGroup() as group:  # a StageError cancels the other items
                # Longest chains first (the semaphore is FIFO): a 4-part RIMO-P item started
                # last would leave the run waiting 4 round trips on one connection at the end.
                wanted = [(it, j) for it in self.items for j in range(self.samples)]
                order = sorted(wanted, key=lambda w: -calls_needed([w[0]]))
                started = {(id(it), j): group.create_task(self.one(it, j)) for it, j in order}
                tasks = [started[id(it), j] for it, j in wanted]
        except ExceptionGroup as failed:
            stage_errors = [e for e in failed.exceptions if isinstance(e, StageError)]
            raise (stage_errors or failed.exceptions)[0] from None
        finally:  # what was cached is made durable even when the stage stops
            syncer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await syncer
            await asyncio.to_thread(self.cache.sync)
        return [t.result() for t in tasks]

    async def sync_every(self, interval_s: float) -> None:
        """fsync the new cache entries in batches, off the event loop (``cache.sync``)."""
        while True:
            await asyncio.sleep(interval_s)
            paths = self.cache.take_unsynced()
            if paths:  # shielded: a cancelled run still finishes the batch it took
                await asyncio.shield(asyncio.to_thread(self.cache.sync, paths))

    def close(self) -> dict[str, Any]:
        self.bar.close()
        wall = time.monotonic() - self.started
        print(f"{self.label}: {len(self.items)} items x {self.samples} samples, "
              f"{sum(self.hits.values())} cached replies, {sum(self.sent.values())} requests "
              f"sent, {self.errors} samples failed, {wall:.1f}s", file=sys.stderr)
        return {"samples": self.samples, "wall_s": round(wall, 3), "failed": self.errors,
                "tracks": {t: {"requests_sent": self.sent[t], "cached_replies": self.hits[t]}
                           for t in (TRACK_N, TRACK_P)}}

    async def one(self, item: Item, sample: int) -> Prediction:
        # One slot per sample: RIMO-P parts run in order inside it, samples run in parallel.
        async with self.semaphore:
            pred = await (self.rimo_n(item, sample) if item.track == TRACK_N
                          else self.rimo_p(item, sample))
        pred.sample = sample
        if pred.status == STATUS_ERROR:
            self.errors += 1
        return pred

    async def call(self, track: str, messages: list[dict[str, str]], sample: int
                   ) -> tuple[ChatReply, str]:
        request = self.transport.request(messages, sample)
        payload = cache_payload(self.transport, request, sample)
        key = request_key(payload)
        reply = self.cached(key, payload)
        if reply is None:
            reply = await self.single_flight(track, key, payload, request)
        else:
            self.hits[track] += 1
        self.bar.update(1)
        return reply, key

    async def single_flight(self, track: str, key: str, payload: dict[str, Any],
                            request: dict[str, Any]) -> ChatReply:
        """Two items asking the very same thing share one request. The first one sends it in
        its own task (no extra task per request); the others wait on a future."""
        shared = self.inflight.get(key)
        if shared is not None:
            return await asyncio.shield(shared)
        shared = self.inflight[key] = asyncio.get_running_loop().create_future()
        try:
            reply = await self.fetch(track, key, payload, request)
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

    async def fetch(self, track: str, key: str, payload: dict[str, Any],
                    request: dict[str, Any]) -> ChatReply:
        if self.probed is None:  # only a run that sends anything probes: a warm cache needs none
            self.probed = asyncio.ensure_future(self.transport.probe())
        if not self.probed.done():
            await asyncio.shield(self.probed)
        self.probed.result()  # re-raises the probe's StageError
        self.sent[track] += 1
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
        # Stored before anything else runs: a kill from here on never re-sends this request.
        self.cache.put(key, payload, reply.to_json())
        return reply

    async def rimo_n(self, item: Item, sample: int) -> Prediction:
        try:
            reply, key = await self.call(item.track, rimo_n_messages(item, self.system_prompt),
                                         sample)
        except TransportError as exc:
            self.bar.update(1)
            return Prediction(item.track, item.problem_id, None, STATUS_ERROR, str(exc),
                              {"request_sha256": exc.request_sha256, "error_kind": exc.kind,
                               "requests": 1, "usage": dict.fromkeys(USAGE_KEYS, 0)})
        answer = read_reply(reply, key, self.think)
        return Prediction(item.track, item.problem_id,
                          extract.extract_boxed(answer.text) or "", details=answer.details)

    async def rimo_p(self, item: Item, sample: int) -> Prediction:
        proved: list[str] = []
        parts: list[dict[str, Any]] = []
        total = len(item.sub_problems)
        for index in range(total):
            messages = rimo_p_messages(item, index, proved, self.system_prompt)
            try:
                reply, key = await self.call(item.track, messages, sample)
            except TransportError as exc:
                self.bar.update(total - index)  # the remaining parts will not be asked
                details = sum_parts(parts, index + 1)
                details.update(failed_request_sha256=exc.request_sha256, error_kind=exc.kind,
                               failed_part=index + 1)
                return Prediction(item.track, item.problem_id, None, STATUS_ERROR,
                                  f"part {index + 1} of {total}: {exc}", details)
            answer = read_reply(reply, key, self.think)
            parts.append(answer.details)
            proved.append(answer.text.strip())
        return Prediction(item.track, item.problem_id, proved, details=sum_parts(parts, total))


def _run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Called from inside a running loop (a notebook): give the coroutine a loop of its own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
