"""Anthropic's Message Batches as a ``ChatTransport`` (``predict.anthropic.batch.enabled:
true``), over the provider-neutral rounds, records and resume of ``rounds``.

One batch is one call: ``messages.batches.create(requests=[{"custom_id": <cache key>, "params":
<the online create kwargs>}])`` (the cache key is a sha256 in hex, 64 characters, so it is a
valid ``custom_id``: ``^[a-zA-Z0-9_-]{1,64}$``); ``retrieve`` polls it until ``processing_status:
ended``; ``results`` streams its JSONL. A ``succeeded`` result is parsed as the online reply
(``translate.parse_message``: thinking blocks -> reasoning, ``max_tokens`` -> truncated, usage),
so a batch reply equals the online one; an ``errored`` one is decided as online
(``translate.classify_result_error``): ``overloaded_error``, ``api_error`` and the like, like
``canceled`` and ``expired``, are not answered (a follow-up batch); a 400 naming a request
parameter stops the stage naming the params key.

The durable order, and the one gap it leaves. With no upload there is no file id to record
before the create, and a Message Batch carries no metadata, so: the record (state
``creating``, its keys) is fsynced BEFORE the create, and the batch id right after it. A run
killed between the two left a record that may or may not have a batch. The next run lists the
batches (newest first) created since the record was written (``SKEW_S`` earlier, for the
provider's clock) with the same number of requests and no record of ours holding them; an
ended one is told apart by its results (are their custom_ids our keys?).

- Exactly one candidate: it is adopted (polled and collected, never made again). Were it
  another run's after all, its results hold none of our keys, which then go into a follow-up
  batch: a round lost, nothing paid twice.
- None: the create never arrived; the record is dropped and the keys go into a new batch.
- Several (another run made a batch of the same size meanwhile): the stage stops, naming the
  record file and the candidates, rather than guess; they are told apart once they end, or
  ``rimo-eval predict --batch-cancel`` cancels them (and the next run adopts ours).

The create itself is never retried by the SDK (a retry after a lost answer would make a second
batch); the reads are.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rimo_eval.chat.anthropic import translate
from rimo_eval.chat.anthropic.transport import AnthropicTransport
from rimo_eval.chat.batch.records import BatchRecord
from rimo_eval.chat.batch.results_cap import results_cap, results_too_large
from rimo_eval.chat.batch.rounds import BatchRounds, Outcome, Polled, records_root
from rimo_eval.chat.capped_http import capped
from rimo_eval.chat.errors import BadReply, EngineError, MalformedResponse, error_for
from rimo_eval.errors import StageError
from rimo_eval.io.hashing import canonical_json
from rimo_eval.params.chat import AnthropicParams

if TYPE_CHECKING:
    from anthropic.types.messages import MessageBatchRequestCounts

PROVIDER = "anthropic"  # its records: <cache_dir>/batches/anthropic
SKEW_S = 60.0  # how far the provider's clock may run behind ours
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def batch_request(key: str, request: dict[str, Any]) -> dict[str, Any]:
    """One entry of ``requests``: the online kwargs, ``extra_body`` merged in as the SDK sends
    it (``extra_headers`` go on the create call: a batch request has no headers)."""
    if not _CUSTOM_ID.match(key):  # a cache key is 64 hex digits
        raise ValueError(f"cache key {key!r} is not a valid custom_id")
    params = {k: v for k, v in request.items() if k not in ("extra_body", "extra_headers")}
    params.update(request.get("extra_body") or {})
    return {"custom_id": key, "params": params}


def _total(counts: MessageBatchRequestCounts) -> int:
    return (counts.processing + counts.succeeded + counts.errored + counts.canceled
            + counts.expired)


def _polled(batch: Any) -> Polled:
    c = batch.request_counts
    counts = f", {c.succeeded}/{_total(c)} succeeded, {c.errored} errored" + "".join(
        f", {n} {name}" for name, n in (("canceled", c.canceled), ("expired", c.expired)) if n)
    return Polled(batch.id, batch.processing_status, batch.processing_status == "ended",
                  counts)


class AnthropicBatchTransport(BatchRounds):
    first_state = "creating"

    def __init__(self, params: AnthropicParams, section: str = translate.PARAMS_SECTION
                 ) -> None:
        online = AnthropicTransport(params, section)  # same requests, keys and errors
        super().__init__(online, params, section, records_root(params.cache_dir or "",
                                                               PROVIDER))
        self.online: AnthropicTransport = online
        self._create_client = online._client  # max_retries=0: a create is sent once
        self.client = online._client.with_options(max_retries=params.max_retries)
        self._results_cap = results_cap(params, section)

    def line_bytes(self, key: str, request: dict[str, Any]) -> int:
        return len(canonical_json(batch_request(key, request)).encode("utf-8")) + 1

    async def create(self, record: BatchRecord) -> str:
        # The record is already durable in state "creating": see the module docstring.
        requests = [batch_request(k, p["request"]) for k, p in record.keys.items()]
        headers = next(iter(record.keys.values()))["request"].get("extra_headers")
        batch = await self._create_client.messages.batches.create(
            requests=requests, extra_headers=headers)  # type: ignore[arg-type]
        return batch.id

    async def poll(self, batch_id: str) -> Polled:
        return _polled(await self.client.messages.batches.retrieve(batch_id))

    async def cancel(self, batch_id: str) -> Polled:
        return _polled(await self.client.messages.batches.cancel(batch_id))

    async def outcomes(self, record: BatchRecord, polled: Polled) -> dict[str, Outcome]:
        out: dict[str, Outcome] = {}
        try:
            with capped(self._results_cap):  # per line: the stream is large in total
                async for entry in await self.client.messages.batches.results(
                        polled.batch_id):
                    if entry.custom_id in record.keys:
                        out[entry.custom_id] = self._read(
                            entry.result, record.keys[entry.custom_id]["request"])
        except BadReply as exc:
            raise results_too_large(self.section, polled.batch_id, exc) from None
        return out

    def _read(self, result: Any, request: dict[str, Any]) -> Outcome:
        """A reply, the error the request ends with, or None: not answered (send again)."""
        if result.type == "succeeded":
            try:
                return self.online._scrub(self.online.reply_of(result.message, 0.0))
            except MalformedResponse:  # a garbled result is sent again, as online
                return None
            except EngineError as exc:  # a refusal is that item's error; no content: again
                decision = self.online.decide(exc, request)
                return None if decision.retryable else self.online.final_error(exc, decision, 1)
        if result.type != "errored":
            return None  # canceled, expired
        decision = translate.classify_result_error(result.error, request)
        if decision.retryable:  # overloaded, api_error, rate limit: a follow-up
            return None
        return self.online.final_error(error_for(decision), decision, 1)

    async def candidates(self, record: BatchRecord, records: list[BatchRecord]) -> list[str]:
        """The batches that may be the one a killed create made for ``record`` (module
        docstring); one whose results hold exactly its keys alone, when there is one."""
        adopted = {r.batch_id for r in records if r.batch_id}
        found = []
        async for batch in self.client.messages.batches.list(limit=100):  # newest first
            if batch.created_at.timestamp() < record.created - SKEW_S:
                break
            if batch.id in adopted or _total(batch.request_counts) != len(record.keys):
                continue
            if batch.processing_status == "ended":
                ids = await self._custom_ids(batch.id)
                if ids == set(record.keys):
                    return [batch.id]
                if ids is not None:
                    continue  # another run's batch of the same size
            found.append(batch.id)
        return found

    async def _custom_ids(self, batch_id: str) -> set[str] | None:
        try:
            with capped(self._results_cap):
                return {e.custom_id async for e in await self.client.messages.batches.results(
                    batch_id)}
        except Exception:  # archived, or the results are gone: it cannot be told apart
            return None

    async def find_batch(self, record: BatchRecord, records: list[BatchRecord]) -> str | None:
        found = await self.candidates(record, records)
        if len(found) <= 1:
            return found[0] if found else None
        raise StageError(
            f"{self.section}.batch: the batch record {self.records.path(record.id)} "
            f"({len(record.keys)} requests, round {record.round}) was written before a create "
            f"whose answer never came (the run was killed), and {len(found)} batches of that "
            f"size, none of them recorded, were created since: {', '.join(found)}. Not "
            "guessing which one is ours (that could pay twice): rerun once they have ended "
            "(their results tell them apart), or cancel them with `rimo-eval predict "
            "--batch-cancel` and rerun")
