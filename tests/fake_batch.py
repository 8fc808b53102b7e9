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
``failed`` validation (``errors`` naming line 1); custom_ids whose request's
prompt holds ``[[batch5xx:K]]`` get HTTP 500 in the first K batches that hold them;
``flaky_every``: every n-th line of each batch gets HTTP 500 the first time its request is
seen.

``hold``: kinds (``upload``, ``create``, ``retrieve``, ``content``) whose next request is held
unanswered (an upload or create after it took effect) until ``release()`` or ``stop()``;
``held`` is set meanwhile, so a test can kill the client at that phase.

``log``: every event (``create``, ``answer`` with status, ``cancel``), and ``violations``:
a create holding a request that is in another live batch, or one already answered 200.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.chat_server import ChatServer, prompt_text

LIVE = ("validating", "in_progress", "finalizing", "cancelling")
_STEPS = ("validating", "in_progress", "finalizing", "completed")
_FIVEXX = re.compile(r"\[\[batch5xx:(\d+)\]\]")


@dataclass
class FakeBatchServer:
    chat: ChatServer
    advance_every: int = 1
    expire_next: bool = False
    fail_next: bool = False
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    hold: set[str] = field(default_factory=set)
    flaky_every: int | None = None  # every n-th line of a batch: HTTP 500 the first time

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._lines: dict[str, list[dict[str, Any]]] = {}  # batch id -> its requests
        self._retrieves: Counter[str] = Counter()
        self._seen_5xx: Counter[str] = Counter()
        self._failing: set[str] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self.held = threading.Event()
        self._release = threading.Event()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeBatchServer:
        self._httpd = _Quiet(("127.0.0.1", 0), _handler(self))
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def release(self) -> None:
        self._release.set()

    def _maybe_hold(self, kind: str) -> None:
        with self._lock:
            if kind not in self.hold:
                return
            self.hold.discard(kind)
            self._release.clear()
            self.held.set()
        self._release.wait(120)
        self.held.clear()

    # -- inspection ------------------------------------------------------------------------
    def answered_ok(self) -> Counter[str]:
        """How many times each custom_id was answered 200 (over all batches)."""
        return Counter(e["custom_id"] for e in self.log
                       if e["event"] == "answer" and e["status"] == 200)

    def live(self) -> list[str]:
        with self._lock:
            return [b for b, obj in self.batches.items() if obj["status"] in LIVE]

    def finish_all(self) -> None:
        """Complete every live batch now (the provider finished while nobody polled)."""
        with self._lock:
            for batch_id in self.live():
                self._finish(batch_id, "completed")

    # -- the API ---------------------------------------------------------------------------
    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):06d}"

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
            ids = [line["custom_id"] for line in lines]
            live_ids = {c for b in self.live() for c in self._custom_ids(b)}
            done = set(self.answered_ok())
            for cid in ids:
                if cid in live_ids:
                    self.violations.append(f"{bid}: {cid} is in another live batch")
                if cid in done:
                    self.violations.append(f"{bid}: {cid} was already answered 200")
            obj = {"id": bid, "object": "batch", "endpoint": body.get("endpoint"),
                   "input_file_id": fid, "completion_window": body.get("completion_window"),
                   "status": "validating", "created_at": int(time.time()),
                   "output_file_id": None, "error_file_id": None, "errors": None,
                   "metadata": body.get("metadata"),
                   "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
            if self.fail_next:
                self.fail_next = False
                self._failing.add(bid)  # fails validation on its first retrieve
            self.batches[bid], self._lines[bid] = obj, lines
            self.log.append({"event": "create", "batch": bid, "custom_ids": ids})
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
                self.log.append({"event": "cancel", "batch": bid})
            return obj

    def _custom_ids(self, bid: str) -> list[str]:
        return [line["custom_id"] for line in self._lines[bid]]

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
            self.log.append({"event": "answer", "batch": bid, "custom_id": cid,
                             "status": status_code})
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
        if self.flaky_every and n % self.flaky_every == 0 and cid not in self._seen_5xx:
            self._seen_5xx[cid] += 1
            return 500, {"error": {"message": "flaky", "type": "server"}}
        match = _FIVEXX.search(prompt_text(body))
        if match:
            self._seen_5xx[cid] += 1
            if self._seen_5xx[cid] <= int(match.group(1)):
                return 500, {"error": {"message": "The server had an error", "type": "server"}}
        return forward(self.chat.base_url + "/chat/completions", json.dumps(body).encode())


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a held reply to a client killed meanwhile: the broken pipe is the point


def forward(url: str, data: bytes | None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, {"error": {"message": raw.decode(errors="replace")}}


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


def _handler(fake: FakeBatchServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length", 0)))

        def _json(self, code: int, obj: Any) -> None:
            self._send(code, json.dumps(obj).encode(), "application/json")

        def _send(self, code: int, data: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _missing(self) -> None:
            self._json(404, {"error": {"message": f"not found: {self.path}"}})

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
