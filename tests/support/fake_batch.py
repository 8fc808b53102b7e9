"""A fake OpenAI Batch API on 127.0.0.1, in front of a ``ChatServer`` (the fake model).

It speaks what the official ``openai`` client's ``files`` and ``batches`` resources send:
``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}`` and ``/content``,
``POST /v1/batches``, ``GET /v1/batches`` (list) and ``/v1/batches/{id}``, ``POST
/v1/batches/{id}/cancel``. Every other path (``/v1/chat/completions``, ``/v1/models``) is
forwarded to the chat server, so an online run against this base URL and a batch run get their
replies from the same fake model, under the same cache keys.

A batch moves one state per retrieve: ``validating`` -> ``in_progress`` -> ``finalizing`` ->
``completed`` (``advance_every`` retrieves per step); ``finish_all()`` completes every live
batch at once, as if the provider finished while nobody polled. Each line of a finishing batch
is POSTed to the chat server, so the output line's body is what the online request would get.
Output and error files are JSONL of ``{"id", "custom_id", "response": {"status_code",
"body"}, "error"}``; non-200 lines and expired ones go to the error file, as OpenAI does.

Modes (server-wide, changeable between runs): ``expire_next``: the next batch to finish
``expired`` with only its first half answered; ``fail_next``: the next create is a batch that
``failed`` validation (``errors`` naming line 1); ``[[batch5xx:K]]`` and ``flaky_every``
(``batch_fake_base``) get HTTP 500.

``hold`` (``batch_fake_base``): ``upload``, ``create`` (both after they took effect),
``retrieve``, ``content``. ``log`` and ``violations``: ``batch_fake_base``.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.batch_fake_base import BatchFake, JSONHandler, forward
from tests.support.chat_server import ChatServer, prompt_text

LIVE = ("validating", "in_progress", "finalizing", "cancelling")
_STEPS = ("validating", "in_progress", "finalizing", "completed")


@dataclass
class FakeBatchServer(BatchFake):
    LIVE = LIVE
    chat: ChatServer
    fail_next: bool = False
    lose_next_create: bool = False  # the next create is made, but answered with a 500
    files: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._failing: set[str] = set()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _end(self, bid: str) -> None:
        self._finish(bid, "completed")

    # -- the API ---------------------------------------------------------------------------
    def upload(self, purpose: str, filename: str, data: bytes) -> dict[str, Any]:
        with self._lock:
            fid = self._new_id("file")
            obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                   "filename": filename, "purpose": purpose, "status": "processed"}
            self.files[fid] = {**obj, "_data": data}
            return obj

    def create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            fid = body.get("input_file_id")
            if fid not in self.files:
                return 404, {"error": {"message": f"No such File object: {fid}"}}
            lines = [json.loads(line) for line in self.files[fid]["_data"].splitlines() if line]
            bid = self._new_id("batch")
            obj = {"id": bid, "object": "batch", "endpoint": body.get("endpoint"),
                   "input_file_id": fid, "completion_window": body.get("completion_window"),
                   "status": "validating", "created_at": int(time.time()),
                   "output_file_id": None, "error_file_id": None, "errors": None,
                   "metadata": body.get("metadata"),
                   "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
            if self.fail_next:
                self.fail_next = False
                self._failing.add(bid)  # fails validation on its first retrieve
            self._register(bid, obj, lines)
            if self.lose_next_create:
                self.lose_next_create = False
                return 500, {"error": {"message": "the answer to this create was lost"}}
            return 200, obj

    def retrieve(self, bid: str) -> dict[str, Any] | None:
        with self._lock:
            obj = self.batches.get(bid)
            if obj is None:
                return None
            if bid in self._failing:
                self._failing.discard(bid)
                obj.update(status="failed", errors={"object": "list", "data": [
                    {"code": "invalid_request", "line": 1, "param": "body.model",
                     "message": "The model 'fake-model' does not support the Batch API."}]})
            elif obj["status"] == "cancelling":
                self._finish(bid, "cancelled")
            elif obj["status"] in LIVE:
                self._retrieves[bid] += 1
                if self._retrieves[bid] % self.advance_every == 0:
                    step = _STEPS[_STEPS.index(obj["status"]) + 1]
                    if step == "completed":
                        self._finish(bid, "expired" if self.expire_next else "completed")
                    else:
                        obj["status"] = step
            return obj

    def cancel(self, bid: str) -> dict[str, Any] | None:
        with self._lock:
            obj = self.batches.get(bid)
            if obj is not None and obj["status"] in LIVE:
                obj["status"] = "cancelling"
                self._cancelled(bid)
            return obj

    def _finish(self, bid: str, status: str) -> None:
        obj, lines = self.batches[bid], self._lines[bid]
        if status == "expired":
            self.expire_next = False
        answer_upto = len(lines) // 2 if status == "expired" else (
            0 if status == "cancelled" else len(lines))
        out, err = [], []
        for n, line in enumerate(lines):
            cid = line["custom_id"]
            if n >= answer_upto:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                err.append({"id": f"req-{bid}-{n}", "custom_id": cid, "response": None,
                            "error": {"code": code, "message": f"not processed ({status})"}})
                continue
            status_code, body = self._answer(cid, line["body"], n)
            self._answered(bid, cid, status_code)
            entry = {"id": f"req-{bid}-{n}", "custom_id": cid,
                     "response": {"status_code": status_code, "request_id": f"r{n}",
                                  "body": body}, "error": None}
            (out if status_code == 200 else err).append(entry)
        counts = {"total": len(lines), "completed": sum(1 for _ in out), "failed": len(err)}
        obj.update(status=status, request_counts=counts)
        for kind, entries in (("output_file_id", out), ("error_file_id", err)):
            if entries:
                data = "".join(json.dumps(e) + "\n" for e in entries).encode()
                obj[kind] = self.upload("batch_output", f"{bid}_{kind}.jsonl", data)["id"]

    def _answer(self, cid: str, body: dict[str, Any], n: int = 1) -> tuple[int, Any]:
        if self._injected_5xx(cid, prompt_text(body), n):
            return 500, {"error": {"message": "The server had an error", "type": "server"}}
        return forward(self.chat.base_url + "/chat/completions", json.dumps(body).encode())


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


def _handler(fake: FakeBatchServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            if m := re.fullmatch(r"/v1/files/([\w-]+)/content", path):
                fake._maybe_hold("content")
                f = fake.files.get(m.group(1))
                return self._send(200, f["_data"], "application/octet-stream") if f else \
                    self._missing()
            if m := re.fullmatch(r"/v1/files/([\w-]+)", path):
                f = fake.files.get(m.group(1))
                return self._json(200, {k: v for k, v in f.items() if k != "_data"}) if f \
                    else self._missing()
            if path == "/v1/batches":
                with fake._lock:
                    data = list(fake.batches.values())[::-1]
                return self._json(200, {"object": "list", "data": data, "has_more": False,
                                        "first_id": data[0]["id"] if data else None,
                                        "last_id": data[-1]["id"] if data else None})
            if m := re.fullmatch(r"/v1/batches/([\w-]+)", path):
                fake._maybe_hold("retrieve")
                obj = fake.retrieve(m.group(1))
                return self._json(200, obj) if obj else self._missing()
            code, body = forward(fake.chat.base_url.removesuffix("/v1") + self.path, None)
            self._json(code, body)

        def do_POST(self) -> None:
            raw, path = self._body(), self.path.split("?")[0].rstrip("/")
            if path == "/v1/files":
                fields = _multipart(self.headers["Content-Type"], raw)
                purpose = fields.get("purpose", (None, b""))[1].decode()
                name, data = fields.get("file", (None, b""))
                if purpose != "batch" or not data:
                    return self._json(400, {"error": {"message": "need purpose=batch + file"}})
                obj = fake.upload(purpose, name or "upload.jsonl", data)
                fake._maybe_hold("upload")
                return self._json(200, obj)
            if path == "/v1/batches":
                code, obj = fake.create(json.loads(raw))
                fake._maybe_hold("create")
                return self._json(code, obj)
            if m := re.fullmatch(r"/v1/batches/([\w-]+)/cancel", path):
                obj = fake.cancel(m.group(1))
                return self._json(200, obj) if obj else self._missing()
            code, body = forward(fake.chat.base_url.removesuffix("/v1") + self.path, raw)
            self._json(code, body)

    return Handler
