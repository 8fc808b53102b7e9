"""A fake Anthropic Message Batches API on 127.0.0.1, in front of a ``FakeAnthropic`` (the fake
model), that the official ``anthropic`` SDK talks to.

``POST /v1/messages/batches`` (``{"requests": [{"custom_id", "params"}]}``), ``GET
/v1/messages/batches`` (list, newest first), ``GET /v1/messages/batches/{id}``, ``GET
.../results`` (JSONL; the batch object's ``results_url`` points there once it has ended) and
``POST .../cancel`` (https://platform.claude.com/docs/en/api/creating-message-batches). Every
other path (``POST /v1/messages``, ``GET /v1/models``) goes to the fake model, so an online run
against this base URL and a batch run get their replies from the same model under the same
cache keys. A key is required (``x-api-key`` or ``Authorization: Bearer``, as the model fake
reads it); ``keys_seen`` holds every key the batch endpoints got.

A batch is ``in_progress`` until its ``2 * advance_every``-th retrieve, then ``ended``: each
request is POSTed to the fake model with the create call's key and ``anthropic-version``, so a
``succeeded`` result's ``message`` is what the online request gets, and a non-200 is an
``errored`` result holding the model's error body (``[[reject:PARAM]]``, ``[[fail:529:K]]``
...). ``[[batch5xx:K]]`` / ``flaky_every`` (``batch_fake_base``) make it ``errored`` with an
``api_error``; ``expire_next`` ends the next batch with only its first half answered and the
rest ``expired``; a cancelled batch is ``canceling`` until its next retrieve or list, then
``ended`` with its requests ``canceled``. ``finish_all()`` ends every live batch at once.

``hold`` (``batch_fake_base``): ``precreate`` (before a create takes effect: released, the
connection is dropped and nothing is created, as if it never arrived), ``create`` (after it
took effect), ``retrieve``, ``results``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.batch_fake_base import BatchFake, JSONHandler, forward
from tests.support.fake_anthropic import FakeAnthropic

_COUNTS = ("processing", "succeeded", "errored", "canceled", "expired")


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class FakeMessageBatches(BatchFake):
    LIVE = ("in_progress", "canceling")
    STATUS = "processing_status"
    model: FakeAnthropic
    keys_seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._auth: dict[str, dict[str, str]] = {}  # batch id -> headers to answer it with
        self._results: dict[str, list[dict[str, Any]]] = {}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    @property
    def base_url(self) -> str:
        """Host and port only, as the SDK takes it (it adds ``/v1/...``)."""
        return f"http://127.0.0.1:{self.port}"

    def _end(self, bid: str) -> None:
        self._finish(bid)

    # -- the API ---------------------------------------------------------------------------
    def create(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            lines = list(body.get("requests") or [])
            bid = self._new_id("msgbatch")
            created = datetime.now(UTC)
            obj = {"id": bid, "type": "message_batch", "processing_status": "in_progress",
                   "request_counts": dict.fromkeys(_COUNTS, 0) | {"processing": len(lines)},
                   "created_at": created.isoformat(), "ended_at": None,
                   "expires_at": (created + timedelta(hours=24)).isoformat(),
                   "cancel_initiated_at": None, "archived_at": None, "results_url": None}
            self._auth[bid] = headers
            self._register(bid, obj, lines)
            return obj

    def retrieve(self, bid: str) -> dict[str, Any] | None:
        with self._lock:
            obj = self.batches.get(bid)
            if obj is None:
                return None
            if obj["processing_status"] == "canceling":
                self._finish(bid, cancelled=True)
            elif obj["processing_status"] == "in_progress":
                self._retrieves[bid] += 1
                if self._retrieves[bid] >= 2 * self.advance_every:
                    self._finish(bid)
            return obj

    def cancel(self, bid: str) -> dict[str, Any] | None:
        with self._lock:
            obj = self.batches.get(bid)
            if obj is not None and obj["processing_status"] == "in_progress":
                obj.update(processing_status="canceling", cancel_initiated_at=_now())
                self._cancelled(bid)
            return obj

    def results(self, bid: str) -> bytes | None:
        entries = self._results.get(bid)
        return None if entries is None else "".join(json.dumps(e) + "\n"
                                                    for e in entries).encode()

    def _finish(self, bid: str, cancelled: bool = False) -> None:
        obj, lines = self.batches[bid], self._lines[bid]
        expire, self.expire_next = self.expire_next and not cancelled, False
        upto = 0 if cancelled else len(lines) // 2 if expire else len(lines)
        entries = []
        for n, line in enumerate(lines):
            cid = line["custom_id"]
            if n >= upto:
                result: dict[str, Any] = {"type": "canceled" if cancelled else "expired"}
            else:
                result = self._answer(bid, cid, line["params"], n)
            entries.append({"custom_id": cid, "result": result})
        counts = dict.fromkeys(_COUNTS, 0)
        for entry in entries:
            counts[entry["result"]["type"]] += 1
        self._results[bid] = entries
        obj.update(processing_status="ended", request_counts=counts, ended_at=_now(),
                   results_url=f"{self.base_url}/v1/messages/batches/{bid}/results")

    def _answer(self, bid: str, cid: str, params: dict[str, Any], n: int) -> dict[str, Any]:
        prompt = self.model.prompt_of(params)
        if self._injected_5xx(cid, prompt, n):
            self._answered(bid, cid, 500)
            return {"type": "errored", "error": {"type": "error", "error": {
                "type": "api_error", "message": "Internal server error"}}}
        status, body = forward(f"{self.model.base_url}/v1/messages",
                               json.dumps(params).encode(), self._auth[bid])
        self._answered(bid, cid, status)
        if status == 200:
            return {"type": "succeeded", "message": body}
        return {"type": "errored", "error": body}

    def list_page(self) -> dict[str, Any]:
        with self._lock:
            for bid in self.live():  # time passes: a cancel under way has ended
                if self.batches[bid]["processing_status"] == "canceling":
                    self._finish(bid, cancelled=True)
            data = list(self.batches.values())[::-1]
        return {"data": data, "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None}


def _handler(fake: FakeMessageBatches) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def _key(self) -> str | None:
            """The request's key (as the model fake reads it), or None after a 401."""
            headers = {k.lower(): v for k, v in self.headers.items()}
            key = fake.model.api_key_of(headers, {})
            if key is None:
                self._json(401, {"type": "error", "error": {
                    "type": "authentication_error", "message": "x-api-key header is required"}})
            else:
                fake.keys_seen.append(key)
            return key

        def _passed_on(self) -> dict[str, str]:
            """The headers the fake model reads: the key and the API version."""
            return {k: v for k, v in self.headers.items()
                    if k.lower() in ("x-api-key", "authorization", "anthropic-version")}

        def _forwarded(self, data: bytes | None) -> None:
            code, body = forward(f"{fake.model.base_url}{self.path}", data, self._passed_on())
            self._json(code, body)

        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            if path == "/v1/models":
                return self._json(200, {"data": [], "has_more": False, "first_id": None,
                                        "last_id": None})
            if not path.startswith("/v1/messages/batches"):
                return self._forwarded(None)
            if self._key() is None:
                return None
            if path == "/v1/messages/batches":
                return self._json(200, fake.list_page())
            if m := re.fullmatch(r"/v1/messages/batches/([\w-]+)/results", path):
                fake._maybe_hold("results")
                data = fake.results(m.group(1))
                return self._missing() if data is None else self._send(
                    200, data, "application/binary")
            if m := re.fullmatch(r"/v1/messages/batches/([\w-]+)", path):
                fake._maybe_hold("retrieve")
                obj = fake.retrieve(m.group(1))
                return self._json(200, obj) if obj else self._missing()
            return self._missing()

        def do_POST(self) -> None:
            raw, path = self._body(), self.path.split("?")[0].rstrip("/")
            if not path.startswith("/v1/messages/batches"):
                return self._forwarded(raw)
            if self._key() is None:
                return None
            if path == "/v1/messages/batches":
                if fake._maybe_hold("precreate"):
                    return self._drop()  # the client died before the create arrived
                obj = fake.create(json.loads(raw), self._passed_on())
                fake._maybe_hold("create")
                return self._json(200, obj)
            if m := re.fullmatch(r"/v1/messages/batches/([\w-]+)/cancel", path):
                obj = fake.cancel(m.group(1))
                return self._json(200, obj) if obj else self._missing()
            return self._missing()

    return Handler
