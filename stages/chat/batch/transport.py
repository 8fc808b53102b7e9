"""The OpenAI Batch API as a ``ChatTransport`` (``predict.openai.batch.enabled: true``).

The session asks for replies one by one, as online; this transport collects the requests that
arrive together (no new one for ``COLLECT_S``) into one batch: upload a JSONL of
``/v1/chat/completions`` lines (``custom_id`` = the cache key), create the batch, poll it every
``poll_s``, download its output and error files, put every reply into the response cache under
the online request's key, and answer the waiting calls. RIMO-P therefore runs in rounds by
itself: part j is asked only once part j-1's batch is collected.

Never paying twice rests on the durable records (``records``): the keys are recorded before
the upload, the file id before the create, the batch id after it. A restarted run first adopts
what the records hold: a live batch is polled again (its keys wait on it, never go into a
second batch), a batch created but not yet recorded is found by its input file id, a finished
one is collected, and only then are new batches made. A cached reply never reaches here (the
session serves it). Requests in the error file (5xx, expired) go into a follow-up batch up to
``max_resubmits`` times, then online when ``fallback_online``, else they fail as online
requests do after their retries; a batch that ``failed`` validation, or a 4xx naming a request
parameter, stops the stage. The official ``openai`` client does the HTTP.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import openai

from stages.chat.batch.records import BatchRecord, RecordStore
from stages.chat.cache import ResponseCache
from stages.chat.errors import HTTPStatusError, MalformedResponse
from stages.chat.openai.replies import parse_completion
from stages.chat.openai.transport import OpenAITransport, resolve_api_key
from stages.chat.transport import ChatReply, ChatTransport, TransportError
from stages.core.config import OpenAIParams
from stages.core.errors import ConfigError, StageError
from stages.core.shared import shared_path

COLLECT_S = 0.5  # requests arriving within this of each other share a batch
TERMINAL = ("completed", "failed", "expired", "cancelled")
ENDPOINT = "/v1/chat/completions"


def batch_line(key: str, request: dict[str, Any]) -> bytes:
    body = dict(request)
    body.update(body.pop("extra_body", None) or {})  # as the online path sends it
    return json.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body},
                      sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"


def records_root(cache_dir: str) -> Path:
    """``<cache_dir>/batches``, resolved as the cache resolves its folder (shared by runs)."""
    return shared_path(cache_dir) / "batches"


def make_client(params: OpenAIParams, section: str, base_url: str) -> openai.AsyncOpenAI:
    key = resolve_api_key(params.api_key_env, base_url, section)
    return openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=params.max_retries,
                              timeout=float(params.timeout_s))


class BatchTransport(ChatTransport):
    concurrency = 1_000_000  # every chain in flight at once: a round is one batch

    def __init__(self, params: OpenAIParams, section: str) -> None:
        if params.cache_dir is None:
            raise ConfigError(f"params.yaml: {section}.batch needs {section}.cache_dir (the "
                              "batch records and replies live there)")
        self.section, self.settings = section, params.batch
        self.online = OpenAITransport(params, section)  # same requests, keys and errors
        self.cache = ResponseCache(params.cache_dir)
        self.records = RecordStore(records_root(params.cache_dir))
        self.client = make_client(params, section, self.online.base_url)
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
        await self.client.close()
        await self.online.aclose()

    # -- collecting requests into batches ------------------------------------------------------
    def _queue(self, key: str, payload: dict[str, Any]) -> None:
        self._pending[key] = payload
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(COLLECT_S, self._flush)

    def _flush(self) -> None:
        self._timer = None
        pending, self._pending = self._pending, {}
        self._round += 1
        chunk: dict[str, dict[str, Any]] = {}
        size = 0
        for key, payload in pending.items():
            line = len(batch_line(key, payload["request"]))
            if chunk and (len(chunk) >= self.settings.max_requests
                          or size + line > self.settings.max_bytes):
                self._spawn(self._submit(chunk, self._round))
                chunk, size = {}, 0
            chunk[key], size = payload, size + line
        if chunk:
            self._spawn(self._submit(chunk, self._round))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- one batch's life ----------------------------------------------------------------------
    async def _submit(self, keys: dict[str, dict[str, Any]], round_: int) -> None:
        record = self.records.new(keys, round_)  # durable before anything is sent
        for key in keys:
            self._live[key] = record.id
        try:
            data = b"".join(batch_line(k, p["request"]) for k, p in keys.items())
            file = await self.client.files.create(file=(f"rimo-{record.id}.jsonl", data),
                                                  purpose="batch")
            record.file_id, record.state = file.id, "uploaded"
            self.records.save(record)  # BEFORE create: a kill after it is found by file id
            batch = await self.client.batches.create(
                input_file_id=file.id, endpoint=ENDPOINT,  # type: ignore[arg-type]
                completion_window=self.settings.completion_window,  # type: ignore[arg-type]
                metadata={"rimo_record": record.id})
            self._adopt(record, batch.id)
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
            batch = await self.client.batches.retrieve(record.batch_id)
            counts = batch.request_counts
            seen = (batch.status, counts and (counts.completed, counts.failed, counts.total))
            if seen != shown:  # the progress: round, state, counts
                shown = seen
                done = f", {counts.completed}/{counts.total} done, {counts.failed} failed" \
                    if counts else ""
                print(f"{self.section}.batch: round {record.round}: {batch.id} "
                      f"{batch.status}{done}", file=sys.stderr, flush=True)
            if batch.status in TERMINAL:
                break
            await asyncio.sleep(float(self.settings.poll_s))
        lines = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = await self.client.files.content(file_id)
                lines += [json.loads(x) for x in content.text.splitlines() if x.strip()]
        await self._collect(record, batch, lines)

    async def _collect(self, record: BatchRecord, batch: Any, lines: list[dict[str, Any]]
                       ) -> None:
        if batch.status == "failed":
            errors = [e for e in (batch.errors.data if batch.errors else None) or []]
            said = "; ".join(f"line {e.line}: {e.message}" for e in errors) or "no reason given"
            self._fatal = StageError(f"{self.section}.batch: batch {batch.id} failed "
                                     f"validation: {said}")
        by_key = {line.get("custom_id"): line for line in lines}
        outcomes: dict[str, ChatReply | Exception | None] = {}
        for key, payload in record.keys.items():
            outcome = self._fatal or self._read(by_key.get(key), payload["request"],
                                                batch.status)
            if isinstance(outcome, ChatReply):
                self.cache.put(key, payload, outcome.to_json())  # the online request's key
            outcomes[key] = outcome
        # Durable before anyone is answered: a kill from here on re-sends nothing.
        await asyncio.to_thread(self.cache.sync)
        record.state, record.status = "collected", batch.status
        self.records.save(record)
        for key, outcome in outcomes.items():
            self._live.pop(key, None)
            if isinstance(outcome, ChatReply):
                self._results[key] = outcome
                for future in self._waiters.pop(key, []):
                    if not future.done():
                        future.set_result(outcome)
            elif outcome is None:
                self._resubmit(key, record.keys[key])  # not answered: a follow-up
            else:
                if isinstance(outcome, StageError):
                    self._fatal = outcome
                self._reject(key, outcome)

    def _read(self, line: dict[str, Any] | None, request: dict[str, Any], status: str
              ) -> ChatReply | Exception | None:
        """A reply, the error the request ends with, or None: not answered (send again)."""
        response = (line or {}).get("response")
        if not isinstance(response, dict):
            return None  # expired, cancelled, or missing from both files
        code, body = response.get("status_code"), response.get("body")
        if code == 200:
            try:
                return self.online._scrub(parse_completion(body, 0.0))
            except MalformedResponse:  # a garbled line is sent again, as online
                return None
        exc = HTTPStatusError(int(code or 0), json.dumps(body).encode(), {})
        if exc.status >= 500 or exc.status in (408, 409, 429):
            return None
        return self.online._final_error(exc, 1, request)

    def _resubmit(self, key: str, payload: dict[str, Any]) -> None:
        if not self._waiters.get(key):
            return  # nobody asks (collected at start): a later ask makes its own batch
        if self._submissions[key] <= self.settings.max_resubmits:
            self._queue(key, payload)
        elif self.settings.fallback_online:
            self._spawn(self._online(key, payload))
        else:
            self._reject(key, TransportError(
                f"not answered in {self._submissions[key]} batch(es) (5xx or expired; "
                f"{self.section}.batch.max_resubmits: {self.settings.max_resubmits})"),
                transient=True)

    async def _online(self, key: str, payload: dict[str, Any]) -> None:
        try:
            reply = await self.online.send(payload["request"])
        except (TransportError, StageError) as exc:
            self._reject(key, exc)
            return
        self._results[key] = reply
        for future in self._waiters.pop(key, []):
            if not future.done():
                future.set_result(reply)

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
            elif record.state == "uploaded":  # created or not? the file id says
                batch_id = await self._find_batch(record)
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

    async def _find_batch(self, record: BatchRecord) -> str | None:
        """The batch created from the record's file, if the create went through before the
        kill. The list is newest first: batches made well before the record cannot be it."""
        async for batch in self.client.batches.list(limit=100):
            if batch.input_file_id == record.file_id:
                return batch.id
            if batch.created_at < record.created - 3600:
                break
        return None
