"""The OpenAI Batch API as a ``ChatTransport`` (``predict.openai.batch.enabled: true``), over
the provider-neutral rounds, records and resume of ``rounds``; ``anthropic.py`` beside it is
Anthropic's Message Batches.

One batch: upload a JSONL of ``/v1/chat/completions`` lines (``custom_id`` = the cache key),
record the file id BEFORE ``batches.create`` (``metadata.rimo_record`` names the record), record
the batch id after it; poll it every ``poll_s``, then read its output and error files. A batch
created but not yet recorded when the run was killed is found again by its input file id. Lines
with a status the online transport would retry (``errors.retryable_status``: 5xx, 408, 409,
429) are not answered (a follow-up batch); a batch that ``failed`` validation, or a 4xx the
online transport decides is ``fatal`` or ``parameter``, stops the stage. The official ``openai``
client does the HTTP.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

import openai

from rimo_eval.chat.api_key import resolve_api_key
from rimo_eval.chat.batch.records import BatchRecord
from rimo_eval.chat.batch.results_cap import results_cap, results_too_large
from rimo_eval.chat.batch.rounds import BatchRounds, Outcome, Polled, records_root
from rimo_eval.chat.capped_http import client_args
from rimo_eval.chat.errors import BadReply, HTTPStatusError, MalformedResponse, retryable_status
from rimo_eval.chat.openai.replies import parse_completion
from rimo_eval.chat.openai.transport import OpenAITransport
from rimo_eval.errors import StageError
from rimo_eval.params.chat import BatchParams, OpenAIParams

__all__ = ["OpenAIBatchTransport", "batch_line", "make_client", "records_root"]

TERMINAL = ("completed", "failed", "expired", "cancelled")
ENDPOINT: Final = "/v1/chat/completions"


def batch_line(key: str, request: dict[str, Any]) -> bytes:
    body = dict(request)
    body.update(body.pop("extra_body", None) or {})  # as the online path sends it
    return json.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body},
                      sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"


def make_client(params: OpenAIParams, section: str, base_url: str) -> openai.AsyncOpenAI:
    """The client, its downloads bounded per line (``results_cap``): an output file is
    legitimately large in total, one line per request, but no line holds more than a reply."""
    key = resolve_api_key(params.api_key_env, base_url, section)
    http = openai.DefaultAsyncHttpxClient(**client_args(results_cap(params, section)))
    return openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=params.max_retries,
                              timeout=float(params.timeout_s), http_client=http)


def _polled(batch: Any) -> Polled:
    counts = batch.request_counts
    done = f", {counts.completed}/{counts.total} done, {counts.failed} failed" if counts else ""
    return Polled(batch.id, batch.status, batch.status in TERMINAL, done)


def _line(text: str) -> Any:
    """One line of an output or error file; a garbled one (not JSON, or nested past the
    parser's depth) is None: its request counts as not answered and is sent again, as a
    garbled body online is retried, instead of failing the whole batch at every rerun."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


class OpenAIBatchTransport(BatchRounds):
    def __init__(self, params: OpenAIParams, section: str) -> None:
        online = OpenAITransport(params, section)  # same requests, keys and errors
        super().__init__(online, params, section, records_root(params.cache_dir or ""))
        self.online: OpenAITransport = online
        self.client = make_client(params, section, online.base_url)
        self._create_tries = params.max_retries + 1
        self._backoff_s, self._backoff_max_s = params.backoff_initial_s, params.backoff_max_s
        # What the last retrieve of each batch said that its outcomes need.
        self._failures: dict[str, str] = {}  # batch id -> why it failed validation
        self._files: dict[str, tuple[str | None, str | None]] = {}  # -> output, error file

    def line_bytes(self, key: str, request: dict[str, Any]) -> int:
        return len(batch_line(key, request))

    async def create(self, record: BatchRecord) -> str:
        data = b"".join(batch_line(k, p["request"]) for k, p in record.keys.items())
        file = await self.client.files.create(file=(f"rimo-{record.id}.jsonl", data),
                                              purpose="batch")
        record.file_id, record.state = file.id, "uploaded"
        self.records.save(record)  # BEFORE create: a kill after it is found by file id
        # The SDK would retry a create whose answer was lost and make a second batch of the
        # same requests: each create is sent once, and after a failure the batch list says
        # whether it went through before it is sent again.
        once = self.client.with_options(max_retries=0)
        settings = self.settings
        assert isinstance(settings, BatchParams)  # this transport gets predict.openai.batch
        # The SDK types the window as "24h" only; a compatible server may offer others.
        window: Any = settings.completion_window
        for attempt in range(self._create_tries):
            try:
                batch = await once.batches.create(
                    input_file_id=file.id, endpoint=ENDPOINT,
                    completion_window=window,
                    metadata={"rimo_record": record.id})
                return batch.id
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                if status is not None and not retryable_status(status):
                    raise
                found = await self.find_batch(record, [])
                if found is not None:
                    return found
                if attempt + 1 == self._create_tries:
                    raise
                await asyncio.sleep(min(self._backoff_max_s, self._backoff_s * 2 ** attempt))
        raise AssertionError("unreachable")

    async def poll(self, batch_id: str) -> Polled:
        batch = await self.client.batches.retrieve(batch_id)
        if batch.status == "failed":
            errors = [e for e in (batch.errors.data if batch.errors else None) or []]
            self._failures[batch.id] = "; ".join(f"line {e.line}: {e.message}"
                                                 for e in errors) or "no reason given"
        self._files[batch.id] = (batch.output_file_id, batch.error_file_id)
        return _polled(batch)

    async def cancel(self, batch_id: str) -> Polled:
        return _polled(await self.client.batches.cancel(batch_id))

    async def outcomes(self, record: BatchRecord, polled: Polled) -> dict[str, Outcome]:
        if polled.batch_id in self._failures:
            fatal = StageError(f"{self.section}.batch: batch {polled.batch_id} failed "
                               f"validation: {self._failures[polled.batch_id]}")
            return dict.fromkeys(record.keys, fatal)
        by_key: dict[Any, Any] = {}
        for file_id in self._files.get(polled.batch_id, ()):
            if file_id:
                by_key.update(await self._lines(polled.batch_id, file_id, record))
        return {key: self._read(by_key.get(key), payload["request"])
                for key, payload in record.keys.items()}

    async def _lines(self, batch_id: str, file_id: str, record: BatchRecord
                     ) -> dict[Any, Any]:
        """The file's lines of ``record``'s keys, streamed: the others are never held."""
        out = {}
        try:
            async with self.client.files.with_streaming_response.content(file_id) as response:
                async for text in response.iter_lines():
                    line = _line(text) if text.strip() else None
                    if isinstance(line, dict) and line.get("custom_id") in record.keys:
                        out[line["custom_id"]] = line
        except BadReply as exc:
            raise results_too_large(self.section, batch_id, exc) from None
        return out

    def _read(self, line: dict[str, Any] | None, request: dict[str, Any]) -> Outcome:
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
        decision = self.online.decide(exc, request)
        if decision.retryable:
            return None
        return self.online.final_error(exc, decision, 1)

    async def find_batch(self, record: BatchRecord, records: list[BatchRecord]) -> str | None:
        """The batch created from the record's file, if the create went through before the
        kill. The list is newest first: batches made well before the record cannot be it."""
        async for batch in self.client.batches.list(limit=100):
            if batch.input_file_id == record.file_id:
                return batch.id
            if batch.created_at < record.created - 3600:
                break
        return None

    async def close_client(self) -> None:
        await self.client.close()
