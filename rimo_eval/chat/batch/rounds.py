"""What every batch API transport shares (OpenAI's Batch API: ``transport``; Anthropic's Message
Batches: ``anthropic``): a ``ChatTransport`` that answers the session's calls one by one, as
online, but sends them in batches.

Requests that arrive together (no new one for ``COLLECT_S``) make one round; a round over
``max_requests`` requests or ``max_bytes`` bytes is several batches. RIMO-P therefore runs in
rounds by itself: part j is asked only once part j-1's batch is collected. Each reply goes into
the response cache under the online request's key and is fsynced (``cache.sync``) before the
record says ``collected``, so a kill from then on re-sends nothing. Requests a batch did not
answer (5xx, overloaded, expired, cancelled) go into a follow-up batch up to ``max_resubmits``
times, then online when ``fallback_online``, else they fail as online requests do after their
retries; an answer the online path would stop the stage for stops it here too.

Never paying twice rests on the durable records (``records``): the keys are recorded before
anything is sent, and a restarted run first adopts what they hold (under the folder's lock): a
live batch is polled again (its keys wait on it, never go into a second batch), a batch whose
create may have gone through is looked up (``find_batch``, the provider's way), a finished one
is collected, and only then are new batches made. A cached reply never reaches here (the
session serves it).

A subclass says how one batch is made (``create``, recording its own steps), polled
(``poll``), read (``outcomes``) and found again (``find_batch``).
"""

from __future__ import annotations

import asyncio
import sys
from abc import abstractmethod
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rimo_eval.chat.batch.records import BatchRecord, RecordStore
from rimo_eval.chat.cache import ResponseCache
from rimo_eval.chat.retrying import RetryingTransport
from rimo_eval.chat.transport import ChatReply, ChatTransport, TransportError
from rimo_eval.errors import ConfigError, StageError
from rimo_eval.io.terminal import for_terminal
from rimo_eval.io.workspace import shared_path
from rimo_eval.params.chat import AnthropicParams, OpenAIParams

COLLECT_S = 0.5  # requests arriving within this of each other share a batch
# One key's outcome in a batch: its reply, the error it ends with, or None: not answered.
Outcome = ChatReply | Exception | None


def records_root(cache_dir: str, provider: str | None = None) -> Path:
    """``<cache_dir>/batches`` (OpenAI's; ``batches/<provider>`` for another provider, so two
    backends on one cache folder never adopt each other's records), resolved as the cache
    resolves its folder (shared by runs)."""
    root = shared_path(cache_dir) / "batches"
    return root / provider if provider else root


@dataclass(frozen=True)
class Polled:
    """A batch as the provider sees it now: ``counts`` e.g. ``", 3/9 done, 0 failed"``."""

    batch_id: str
    status: str
    ended: bool
    counts: str = ""


class BatchRounds(ChatTransport):
    concurrency = 1_000_000  # every chain in flight at once: a round is one batch
    first_state = "uploading"  # a new record's state (what a kill then leaves)

    def __init__(self, online: RetryingTransport, params: OpenAIParams | AnthropicParams,
                 section: str, root: Path) -> None:
        if params.cache_dir is None:
            raise ConfigError(f"params.yaml: {section}.batch needs {section}.cache_dir (the "
                              "batch records and replies live there)")
        self.section, self.settings, self.online = section, params.batch, online
        self.cache = ResponseCache(params.cache_dir)
        self.records = RecordStore(root)
        self._pending: dict[str, dict[str, Any]] = {}  # key -> payload, for the next batch
        self._waiters: dict[str, list[asyncio.Future[ChatReply]]] = {}
        self._live: dict[str, str] = {}  # key -> record id of the live batch holding it
        self._results: dict[str, ChatReply] = {}
        self._submissions: Counter[str] = Counter()  # batches each key has been in
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._resumed: asyncio.Future[None] | None = None
        self._round = 0
        self._fatal: StageError | None = None

    # -- what a provider defines ---------------------------------------------------------------
    @abstractmethod
    def line_bytes(self, key: str, request: dict[str, Any]) -> int:
        """What one request adds to a batch's size (``max_bytes``)."""

    @abstractmethod
    async def create(self, record: BatchRecord) -> str:
        """Make the batch of ``record`` (saving the record at each step the provider needs to
        find it again) and return its id."""

    @abstractmethod
    async def poll(self, batch_id: str) -> Polled: ...

    @abstractmethod
    async def cancel(self, batch_id: str) -> Polled: ...

    @abstractmethod
    async def outcomes(self, record: BatchRecord, polled: Polled) -> dict[str, Outcome]:
        """Each key's outcome in an ended batch (a key left out: not answered)."""

    @abstractmethod
    async def find_batch(self, record: BatchRecord, records: list[BatchRecord]) -> str | None:
        """The batch a killed run's create made for ``record``, or None if it made none
        (``records``: the folder's others); raises ``StageError`` when it cannot tell."""

    async def candidates(self, record: BatchRecord, records: list[BatchRecord]) -> list[str]:
        """For ``--batch-status``: the batches that may be a not yet recorded create's."""
        return []

    async def close_client(self) -> None:
        pass

    # -- ChatTransport -------------------------------------------------------------------------
    def endpoint(self) -> dict[str, Any]:
        return self.online.endpoint()  # the online key: one cache, both ways

    def request(self, messages: list[dict[str, str]], sample: int = 0) -> dict[str, Any]:
        return self.online.request(messages, sample)

    async def send(self, request: dict[str, Any]) -> ChatReply:
        # Only a caller outside the session has no key to record; it goes online.
        return await self.online.send(request)

    async def probe(self) -> None:
        await self.online.probe()

    def served_name(self) -> str | None:  # the online keys, the weights in them included
        return self.online.served_name()

    async def served_identity(self) -> dict[str, Any] | None:
        return await self.online.served_identity()

    async def send_keyed(self, key: str, payload: dict[str, Any], request: dict[str, Any]
                         ) -> ChatReply:
        if self._resumed is None:
            self._resumed = asyncio.ensure_future(self._resume())
        await asyncio.shield(self._resumed)
        if self._fatal is not None:
            raise self._fatal
        if key in self._results:
            return self._results[key]
        future: asyncio.Future[ChatReply] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(future)
        if key not in self._live and key not in self._pending:
            self._queue(key, payload)
        return await future

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):  # a stopped run: the records keep the live batches
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.records.unlock()
        await self.close_client()
        await self.online.aclose()

    # -- collecting requests into batches ------------------------------------------------------
    def _queue(self, key: str, payload: dict[str, Any]) -> None:
        self._pending[key] = payload
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(COLLECT_S, self._flush)

    def _flush(self) -> None:
        self._timer = None
        pending, self._pending = self._pending, {}
        self._round += 1
        chunk: dict[str, dict[str, Any]] = {}
        size = 0
        for key, payload in pending.items():
            line = self.line_bytes(key, payload["request"])
            if chunk and (len(chunk) >= self.settings.max_requests
                          or size + line > self.settings.max_bytes):
                self._spawn(self._submit(chunk, self._round))
                chunk, size = {}, 0
            chunk[key], size = payload, size + line
        if chunk:
            self._spawn(self._submit(chunk, self._round))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- one batch's life ----------------------------------------------------------------------
    async def _submit(self, keys: dict[str, dict[str, Any]], round_: int) -> None:
        record = self.records.new(keys, round_, self.first_state)  # durable before any send
        for key in keys:
            self._live[key] = record.id
        try:
            self._adopt(record, await self.create(record))
            await self._follow(record)
        except Exception as exc:  # every waiter of these keys must hear of it
            self._fail_all(record, exc)

    def _adopt(self, record: BatchRecord, batch_id: str) -> None:
        record.batch_id, record.state = batch_id, "live"
        self.records.save(record)
        self._submissions.update(list(record.keys))
        for key in record.keys:
            self._live[key] = record.id

    async def _follow(self, record: BatchRecord) -> None:
        assert record.batch_id is not None
        shown = None
        while True:
            polled = await self.poll(record.batch_id)
            if (polled.status, polled.counts) != shown:  # the progress: round, state, counts
                shown = (polled.status, polled.counts)
                print(for_terminal(f"{self.section}.batch: round {record.round}: "
                                   f"{polled.batch_id} {polled.status}{polled.counts}"),
                      file=sys.stderr, flush=True)
            if polled.ended:
                break
            await asyncio.sleep(float(self.settings.poll_s))
        await self._collect(record, polled.status, await self.outcomes(record, polled))

    async def _collect(self, record: BatchRecord, status: str, outcomes: dict[str, Outcome]
                       ) -> None:
        for key, payload in record.keys.items():
            outcome = outcomes.get(key)
            if isinstance(outcome, ChatReply):
                self.cache.put(key, payload, outcome.to_json())  # the online request's key
        # Durable before anyone is answered: a kill from here on re-sends nothing.
        await asyncio.to_thread(self.cache.sync)
        record.state, record.status = "collected", status
        self.records.save(record)
        for key in record.keys:
            outcome = outcomes.get(key)
            self._live.pop(key, None)
            if isinstance(outcome, ChatReply):
                self._answer(key, outcome)
            elif outcome is None:
                self._resubmit(key, record.keys[key])  # not answered: a follow-up
            else:
                if isinstance(outcome, StageError):
                    self._fatal = outcome
                self._reject(key, outcome)

    def _answer(self, key: str, reply: ChatReply) -> None:
        self._results[key] = reply
        for future in self._waiters.pop(key, []):
            if not future.done():
                future.set_result(reply)

    def _resubmit(self, key: str, payload: dict[str, Any]) -> None:
        if not self._waiters.get(key):
            return  # nobody asks (collected at start): a later ask makes its own batch
        if self._submissions[key] <= self.settings.max_resubmits:
            self._queue(key, payload)
        elif self.settings.fallback_online:
            self._spawn(self._online(key, payload))
        else:
            self._reject(key, TransportError(
                f"not answered in {self._submissions[key]} batch(es) (5xx, overloaded or "
                f"expired; {self.section}.batch.max_resubmits: "
                f"{self.settings.max_resubmits})"), transient=True)

    async def _online(self, key: str, payload: dict[str, Any]) -> None:
        try:
            reply = await self.online.send(payload["request"])
        except (TransportError, StageError) as exc:
            self._reject(key, exc)
            return
        self._answer(key, reply)

    def _reject(self, key: str, exc: Exception, transient: bool = False) -> None:
        if isinstance(exc, TransportError) and transient:
            exc.transient = True
        for future in self._waiters.pop(key, []):
            if not future.done():
                future.set_exception(exc)

    def _fail_all(self, record: BatchRecord, exc: Exception) -> None:
        if isinstance(exc, asyncio.CancelledError):
            return
        error: Exception = exc if isinstance(exc, StageError | TransportError) else StageError(
            self.online._redact(f"{self.section}.batch: {type(exc).__name__}: {exc}")[:500]
            + f" (batch record {self.records.path(record.id)}; a rerun resumes it)")
        if isinstance(error, StageError):
            self._fatal = error
        for key in record.keys:
            self._live.pop(key, None)
            self._reject(key, error)

    # -- a restart: adopt what the records hold ------------------------------------------------
    async def _resume(self) -> None:
        try:
            self.records.lock()
            records = self.records.load()
        except (ValueError, RuntimeError) as exc:
            raise StageError(f"{self.section}.batch: {exc}") from None
        for record in records:
            if record.state in ("live", "collected"):
                self._submissions.update(list(record.keys))
            if record.state == "uploading":  # nothing was created from it
                self.records.drop(record)
            elif record.state in ("uploaded", "creating"):  # created or not? ask the provider
                batch_id = await self.find_batch(record, records)
                if batch_id is None:
                    self.records.drop(record)
                else:
                    self._adopt(record, batch_id)
            if record.state == "live":
                for key in record.keys:
                    self._live[key] = record.id
                self._spawn(self._follow_resumed(record))

    async def _follow_resumed(self, record: BatchRecord) -> None:
        try:
            await self._follow(record)
        except Exception as exc:  # the records keep the batch for a restart
            self._fail_all(record, exc)
