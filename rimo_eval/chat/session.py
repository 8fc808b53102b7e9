"""One chat run: a transport behind the response cache, single flight, a concurrency bound,
the probe, the circuit breaker and the progress bar. The engine's public API.

A caller (the RIMO predictors, the judge) opens a ``Session`` over a transport, asks
``call(messages, sample)`` from as many tasks as it likes inside ``gather`` and holding a
``slot()``, and reads the counters afterwards. ``section`` is the params section the settings
came from (``predict.openai``, ``judge``): errors name its keys, whoever runs.

* A cached reply (the stored request equal to the asked one) is served without a request; a
  run whose replies are all cached sends nothing (it asks an OpenAI-compatible server
  ``GET /models`` once, ``served``, and goes on without an answer).
* Two tasks asking the very same thing share one request (single flight), and so do two
  processes on one cache (``rimo_eval.chat.leases``): a request another process is sending is
  waited for, not sent, and the waiting task gives its ``slot()`` back meanwhile, so the
  process sends other requests; a reply that came that way counts as cached.
* The transport's ``probe`` runs once, before the first request is sent.
* What the server reports about the weights behind the model name (``served``) is asked
  once, before the first lookup, and is part of every key.
* ``CircuitBreaker`` stops the run after ``breaker_window`` transport failures in a row.
* ``engine`` (the section's typed ``EngineParams``) gives the cache folder, the breaker's
  window and the stall warning; the transport was built from the same section.
* A reply is stored before anything else runs, so a kill from then on never re-sends it; new
  entries are fsynced in batches off the event loop (``cache.sync``), and once more at the end.
* A ``StageError`` (a configuration that fails every request) cancels the other tasks and is
  what ``gather`` raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from rimo_eval.chat import served
from rimo_eval.chat.breaker import CircuitBreaker
from rimo_eval.chat.cache import SYNC_EVERY_S, ResponseCache, request_key
from rimo_eval.chat.leases import CLAIMED, HELD, STORED, Leases, Waits
from rimo_eval.chat.progress import Progress
from rimo_eval.chat.transport import (
    RETRY_GUARD,
    ChatReply,
    ChatTransport,
    Superseded,
    TransportError,
    cache_payload,
)
from rimo_eval.errors import StageError
from rimo_eval.io.terminal import for_terminal
from rimo_eval.params.chat import EngineParams

T = TypeVar("T")
Messages = list[dict[str, str]]


def lookup(cache: ResponseCache, transport: ChatTransport, messages: Messages, sample: int,
           identity: Mapping[str, Any] | None = None
           ) -> tuple[str, dict[str, Any], dict[str, Any], ChatReply | None]:
    """``(key, payload, request, cached reply or None)`` for one call. An entry of the right
    shape but wrong content, or with no text, is a miss (it is fetched again). ``identity``:
    what the server reports about the weights behind the name (``rimo_eval.chat.served``),
    in the key when there is any: so a payload without it is the one it always was."""
    request = transport.request(messages, sample)
    payload = cache_payload(transport, request, sample)
    if identity:
        payload["served"] = dict(identity)
    key = request_key(payload)
    return key, payload, request, usable(cache.get(key, payload))


def usable(entry: dict[str, Any] | None) -> ChatReply | None:
    """The reply of a stored response, or None when it is not one (a miss)."""
    if entry is None:
        return None
    try:
        reply = ChatReply.from_json(entry)
    except (KeyError, TypeError, ValueError):
        return None
    return reply if reply.texts else None


class _Hold:
    """Whether the current task holds its ``slot()`` (given back while it waits elsewhere)."""

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self.semaphore, self.held = semaphore, True


_holding: contextvars.ContextVar[_Hold | None] = contextvars.ContextVar("rimo_slot",
                                                                      default=None)


class _Slot:
    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self.semaphore = semaphore

    async def __aenter__(self) -> None:
        await self.semaphore.acquire()
        self._token = _holding.set(_Hold(self.semaphore))

    async def __aexit__(self, *exc: object) -> None:
        hold = _holding.get()
        _holding.reset(self._token)
        if hold is not None and hold.held:
            self.semaphore.release()


@contextlib.asynccontextmanager
async def _slot_given_back() -> AsyncIterator[None]:
    """Give the current task's slot back for the block (it sends nothing meanwhile)."""
    hold = _holding.get()
    if hold is None or not hold.held:
        yield
        return
    hold.semaphore.release()
    hold.held = False
    try:
        yield
    finally:  # cancelled while taking it back: held stays False, nothing is released twice
        await hold.semaphore.acquire()
        hold.held = True


class Session:
    """See the module docstring. ``total``: the calls the run will make (the progress bar)."""

    def __init__(self, transport: ChatTransport, engine: EngineParams, *, label: str,
                 section: str, total: int) -> None:
        self.transport, self.label, self.section = transport, label, section
        self.cache = ResponseCache(engine.cache_dir)
        self.leases = Leases(self.cache) if self.cache.root is not None else None
        self._waits = Waits(self.leases) if self.leases is not None else None
        self._semaphore = asyncio.Semaphore(max(1, transport.concurrency))
        self._total, self._stall_warning_s = total, engine.stall_warning_s
        self.bar: Progress | None = None
        self.breaker = CircuitBreaker(engine.breaker_window, label, f"{section}.breaker_window")
        self.sent: Counter[str] = Counter()  # per tag (a track, "judge")
        self.hits: Counter[str] = Counter()
        self._inflight: dict[str, asyncio.Future[ChatReply]] = {}
        self._probed: asyncio.Future[None] | None = None
        self._served: asyncio.Future[dict[str, Any]] | None = None
        self._syncer: asyncio.Task[None] | None = None
        self.started = time.monotonic()

    async def __aenter__(self) -> Session:
        self.bar = Progress(self._total, self.label, self._stall_warning_s)
        self.bar.start()
        self._syncer = asyncio.create_task(self._sync_every(SYNC_EVERY_S))
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None,
                        tb: object) -> None:
        try:  # what was cached is made durable even when the run stops
            if self._syncer is not None:
                self._syncer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._syncer  # re-raises a sync that failed during the run
            await asyncio.to_thread(self.cache.sync)
        except StageError as failed:
            if exc is None:
                raise
            # The run already failed: its own error is the one raised, this one is said too.
            print(for_terminal(f"rimo-eval: {failed}"), file=sys.stderr)
        finally:
            if self._waits is not None:
                await self._waits.close()
            if self.leases is not None:  # its leases end now, not when the process does
                self.leases.close()
            self.cache.close()
            if self.bar is not None:
                self.bar.close()
            await self.transport.aclose()

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.started

    def slot(self) -> _Slot:
        """One of ``transport.concurrency`` slots (FIFO): hold it around a chain of calls."""
        return _Slot(self._semaphore)

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
        if self._served is None:  # asked once, before the first lookup
            self._served = asyncio.ensure_future(
                served.resolve(self.cache, self.transport, self.section, Progress.note))
        identity = (self._served.result() if self._served.done()
                    else await asyncio.shield(self._served))
        key, payload, request, reply = lookup(self.cache, self.transport, messages, sample,
                                              identity)
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
        """Send the request unless another process is sending it: then wait for its reply
        (or for its lease to end, and claim it again)."""
        take_from: str | None = None
        while True:
            leased = False
            if self.leases is not None and self._waits is not None:
                state, owner = self.leases.claim(key, take_from)
                take_from = None
                if state == HELD:
                    assert owner is not None
                    async with _slot_given_back():
                        take_from = await self._waits.until_settled(key, owner)
                    continue
                if state == STORED:
                    reply = usable(self.cache.get(key, payload))
                    if reply is not None:
                        self.hits[tag] += 1
                        return reply
                    # A stored entry that does not serve (corrupt): sent, put replaces it.
                leased = state == CLAIMED
            try:
                return await self._send(tag, key, payload, request, leased)
            except Superseded:  # stalled past the lease: the taker's reply is the one
                continue
            except BaseException:
                if leased:
                    self.leases.release(key)  # type: ignore[union-attr]
                raise

    async def _send(self, tag: str, key: str, payload: dict[str, Any],
                    request: dict[str, Any], leased: bool) -> ChatReply:
        if self._probed is None:  # only a run that sends anything probes
            self._probed = asyncio.ensure_future(self.transport.probe())
        if not self._probed.done():
            await asyncio.shield(self._probed)
        self._probed.result()  # re-raises the probe's StageError
        self.sent[tag] += 1
        assert self.bar is not None
        token = self.bar.begin()
        guard = RETRY_GUARD.set(functools.partial(self.leases.check, key)  # type: ignore[union-attr]
                                if leased else None)
        try:
            reply = await self.transport.send_keyed(key, payload, request)
        except TransportError as exc:
            exc.request_sha256 = key
            self.breaker.failure(str(exc), transient=exc.transient)
            raise
        finally:
            RETRY_GUARD.reset(guard)
            self.bar.end(token)
        self.breaker.success()
        # Stored before anything else runs: a kill from here on never re-sends this request.
        # Another process's reply stored first (a lease taken over) is the one kept and used.
        ours = reply.to_json()
        stored = self.cache.put(key, payload, ours)
        return reply if stored is ours else usable(stored) or reply

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
