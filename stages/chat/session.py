"""One chat run: a transport behind the response cache, single flight, a concurrency bound,
the probe, the circuit breaker and the progress bar. The engine's public API.

A caller (the RIMO predictors, the judge) opens a ``Session`` over a transport, asks
``call(messages, sample)`` from as many tasks as it likes inside ``gather`` and holding a
``slot()``, and reads the counters afterwards. ``section`` is the params section the settings
came from (``predict.openai``, ``judge``): errors name its keys, whoever runs.

* A cached reply (the stored request equal to the asked one) is served without a request; a
  run whose replies are all cached sends nothing and probes nothing.
* Two tasks asking the very same thing share one request (single flight).
* The transport's ``probe`` runs once, before the first request is sent.
* ``CircuitBreaker`` stops the run after ``breaker_window`` transport failures in a row.
* A reply is stored before anything else runs, so a kill from then on never re-sends it; new
  entries are fsynced in batches off the event loop (``cache.sync``), and once more at the end.
* A ``StageError`` (a configuration that fails every request) cancels the other tasks and is
  what ``gather`` raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Coroutine, Iterable
from typing import Any, TypeVar

from stages.chat.breaker import CircuitBreaker
from stages.chat.cache import SYNC_EVERY_S, ResponseCache, request_key
from stages.chat.progress import Progress
from stages.chat.transport import ChatReply, ChatTransport, TransportError, cache_payload
from stages.core.errors import StageError

T = TypeVar("T")
Messages = list[dict[str, str]]


def lookup(cache: ResponseCache, transport: ChatTransport, messages: Messages, sample: int
           ) -> tuple[str, dict[str, Any], dict[str, Any], ChatReply | None]:
    """``(key, payload, request, cached reply or None)`` for one call. An entry of the right
    shape but wrong content, or with no text, is a miss (it is fetched again)."""
    request = transport.request(messages, sample)
    payload = cache_payload(transport, request, sample)
    key = request_key(payload)
    entry = cache.get(key, payload)
    reply = None
    if entry is not None:
        try:
            reply = ChatReply.from_json(entry)
        except (KeyError, TypeError, ValueError):
            reply = None
    return key, payload, request, reply if reply is not None and reply.texts else None


class Session:
    """See the module docstring. ``total``: the calls the run will make (the progress bar)."""

    def __init__(self, transport: ChatTransport, cache_dir: str | None, *, label: str,
                 section: str, total: int, breaker_window: int | None,
                 stall_warning_s: float | None) -> None:
        self.transport, self.label, self.section = transport, label, section
        self.cache = ResponseCache(cache_dir)
        self._semaphore = asyncio.Semaphore(max(1, transport.concurrency))
        self._total, self._stall_warning_s = total, stall_warning_s
        self.bar: Progress | None = None
        self.breaker = CircuitBreaker(breaker_window, label, f"{section}.breaker_window")
        self.sent: Counter[str] = Counter()  # per tag (a track, "judge")
        self.hits: Counter[str] = Counter()
        self._inflight: dict[str, asyncio.Future[ChatReply]] = {}
        self._probed: asyncio.Future[None] | None = None
        self._syncer: asyncio.Task[None] | None = None
        self.started = time.monotonic()

    async def __aenter__(self) -> Session:
        self.bar = Progress(self._total, self.label, self._stall_warning_s)
        self.bar.start()
        self._syncer = asyncio.create_task(self._sync_every(SYNC_EVERY_S))
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:  # what was cached is made durable even when the run stops
            if self._syncer is not None:
                self._syncer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._syncer
            await asyncio.to_thread(self.cache.sync)
            self.cache.close()
        finally:
            if self.bar is not None:
                self.bar.close()
            await self.transport.aclose()

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.started

    def slot(self) -> asyncio.Semaphore:
        """One of ``transport.concurrency`` slots (FIFO): hold it around a chain of calls."""
        return self._semaphore

    def skip(self, n: int = 1) -> None:
        """``n`` calls of the total that will not be made (a failed request, the parts after
        it): the bar still reaches its end."""
        assert self.bar is not None
        self.bar.update(n)

    async def gather(self, coros: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
        """Run the coroutines as tasks, results in order; the first ``StageError`` cancels the
        rest and is raised."""
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(c) for c in coros]
        except ExceptionGroup as failed:
            stage_errors = [e for e in failed.exceptions if isinstance(e, StageError)]
            raise (stage_errors or failed.exceptions)[0] from None
        return [t.result() for t in tasks]

    async def call(self, tag: str, messages: Messages, sample: int = 0
                   ) -> tuple[ChatReply, str]:
        """The reply to ``messages`` (sample ``sample``) and its cache key; raises
        ``TransportError`` for a request that failed for good (``request_sha256`` set)."""
        key, payload, request, reply = lookup(self.cache, self.transport, messages, sample)
        if reply is None:
            reply = await self._single_flight(tag, key, payload, request)
        else:
            self.hits[tag] += 1
        self.skip(1)
        return reply, key

    async def _single_flight(self, tag: str, key: str, payload: dict[str, Any],
                             request: dict[str, Any]) -> ChatReply:
        """The first asker sends the request in its own task (no extra task per request);
        the others wait on a future."""
        shared = self._inflight.get(key)
        if shared is not None:
            return await asyncio.shield(shared)
        shared = self._inflight[key] = asyncio.get_running_loop().create_future()
        try:
            reply = await self._fetch(tag, key, payload, request)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                shared.cancel()
            else:
                shared.set_exception(exc)
                shared.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._inflight[key]
        shared.set_result(reply)
        return reply

    async def _fetch(self, tag: str, key: str, payload: dict[str, Any],
                     request: dict[str, Any]) -> ChatReply:
        if self._probed is None:  # only a run that sends anything probes
            self._probed = asyncio.ensure_future(self.transport.probe())
        if not self._probed.done():
            await asyncio.shield(self._probed)
        self._probed.result()  # re-raises the probe's StageError
        self.sent[tag] += 1
        assert self.bar is not None
        token = self.bar.begin()
        try:
            reply = await self.transport.send_keyed(key, payload, request)
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

    async def _sync_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            paths = self.cache.take_unsynced()
            if paths:  # shielded: a cancelled run still finishes the batch it took
                await asyncio.shield(asyncio.to_thread(self.cache.sync, paths))


def run_sync(coro: Coroutine[Any, Any, T] | Awaitable[T]) -> T:
    """Run a coroutine to completion from synchronous code, also from inside a running loop
    (a notebook), where it gets a loop of its own in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()  # type: ignore[arg-type]
