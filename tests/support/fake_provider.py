"""What the loopback fakes of provider APIs share (``fake_anthropic``, ``fake_gemini``).

A ``FakeProvider`` is a real HTTP server on 127.0.0.1 (stdlib ``http.server``, a
``loopback.RecordingFake`` as ``chat_server``), so the official SDKs are driven over the wire.
Behaviour is chosen per request by ``[[directive:arg]]`` markers in the last user message (the
syntax of ``chat_server``), or server-wide by ``responder(record)``, which returns a ``Reply`` or
``None`` (then the directives decide). Directives every fake knows (each fake adds its own):

``[[fail:CODE:K]]``     the first K attempts of this exact request get HTTP CODE, in that API's
                        error shape (K ``*``: all); 429 carries ``Retry-After: retry_after``
``[[malformed:K]]``     the first K attempts: HTTP 200 with a body that is not JSON
``[[drop:K]]``          the first K attempts: the connection is closed without a response
``[[hang:K]]``          the first K attempts: no response until ``hang_s`` passes
``[[echo_key]]``        HTTP 400 whose message quotes the API key the request carried
``[[echo_key:reply]]``  HTTP 200 whose answer text holds that key (the redaction tests)

Server-wide: ``latency_s`` before every reply; ``hang_after``: once that many requests were
answered, later ones hang (to kill a client at a known point); ``api_key``: when set, a request
carrying another key gets the API's authentication error. Every request is logged in
``records`` (path, headers, JSON body, the key it carried, outcome); ``answered()`` counts the
complete replies per distinct body, so a test can assert that nothing answered was re-sent.

Standalone (benchmarks, a manual ``dvc exp run``): ``python -m tests.support.fake_anthropic``
or ``python -m tests.support.fake_gemini`` (``--latency S``) prints the base URL and serves
until killed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.loopback import (
    LoopbackHandler,
    RecordingFake,
    directives,
    first_k,
    serve_until_interrupted,
)

__all__ = ["FakeProvider", "Record", "Reply", "body_fingerprint", "serve_main"]


def body_fingerprint(body: Any) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass
class Reply:
    """One HTTP answer. ``body``: a JSON object, or raw bytes (a malformed reply)."""

    status: int
    body: dict[str, Any] | bytes
    headers: dict[str, str] = field(default_factory=dict)
    outcome: str = "ok"  # ok | http-CODE | malformed | empty | blocked | ...
    text: str | None = None  # the answer text, for the log

    def data(self) -> bytes:
        return self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()


@dataclass
class Record:
    path: str
    query: dict[str, list[str]]
    body: Any
    key: str
    prompt: str
    headers: dict[str, str]
    api_key: str | None
    started: float
    attempt: int = 0
    outcome: str = "pending"
    reply: str | None = None
    finished: float | None = None

    @property
    def directives(self) -> dict[str, str]:
        return directives(self.prompt)


@dataclass
class FakeProvider(RecordingFake):
    latency_s: float = 0.0
    hang_s: float = 30.0
    hang_after: int | None = None
    retry_after: str = "1"
    api_key: str | None = None
    responder: Callable[[Record], Reply | None] | None = None
    records: list[Record] = field(default_factory=list)

    # -- what each API defines -----------------------------------------------------------
    def routes(self, path: str) -> bool:
        raise NotImplementedError

    def prompt_of(self, body: dict[str, Any]) -> str:
        raise NotImplementedError

    def api_key_of(self, headers: dict[str, str], query: dict[str, list[str]]) -> str | None:
        raise NotImplementedError

    def error(self, status: int, message: str, **extra: Any) -> Reply:
        """That API's error body for ``status``."""
        raise NotImplementedError

    def auth_error(self, record: Record) -> Reply:
        raise NotImplementedError

    def answer(self, record: Record, text: str) -> Reply:
        """A normal reply (with the API's own directives applied), ``text`` the answer."""
        raise NotImplementedError

    # -- lifecycle -------------------------------------------------------------------------
    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    @property
    def base_url(self) -> str:
        """Host and port only: each SDK adds its own path (``/v1/...``, ``/v1beta/...``)."""
        return f"http://127.0.0.1:{self.port}"

    # -- behaviour -------------------------------------------------------------------------
    def arrivals(self, record: Record) -> int:
        """How many requests with this exact body arrived so far (this one included)."""
        return record.attempt

    def respond(self, record: Record) -> Reply | None:
        """The reply, or ``None`` for a dropped connection."""
        d = record.directives
        if self.api_key is not None and record.api_key != self.api_key:
            return self.auth_error(record)
        if record.api_key is None:
            return self.auth_error(record)
        if "drop" in d and first_k(d["drop"], record.attempt):
            return None
        if "fail" in d:
            code, _, k = d["fail"].partition(":")
            if first_k(k, record.attempt):
                reply = self.error(int(code), f"injected {code}")
                if int(code) == 429:
                    reply.headers.setdefault("Retry-After", self.retry_after)
                return reply
        if "echo_key" in d and d["echo_key"] != "reply":
            return self.error(400, f"rejected credentials: {record.api_key}")
        if "malformed" in d and first_k(d["malformed"], record.attempt):
            return Reply(200, b'{"id": "x", "content": [ {"ty', outcome="malformed")
        scripted = self.responder(record) if self.responder else None
        if scripted is not None:
            return scripted
        gold = d.get("gold")
        text = (f"Working through it carefully, the answer is \\boxed{{{gold}}}."
                if gold is not None else
                f"Solution {hashlib.sha256(record.prompt.encode()).hexdigest()[:12]}.")
        if d.get("echo_key") == "reply":
            text = f"{text} (your key is {record.api_key})"
        return self.answer(record, text)


def _make_handler(server: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(LoopbackHandler):
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            prompt = server.prompt_of(body) if isinstance(body, dict) else ""
            rec = Record(url.path, query, body, body_fingerprint(body), prompt, headers,
                         server.api_key_of(headers, query), time.monotonic())
            over = server._begin(rec)
            if not server.routes(url.path) or not isinstance(body, dict):
                self._reply(server.error(404 if isinstance(body, dict) else 400,
                                         f"no route for POST {url.path}"))
                server._finish(rec, "bad-request")
                return
            if server.latency_s:
                time.sleep(server.latency_s)
            d = rec.directives
            if over or ("hang" in d and first_k(d["hang"], rec.attempt)):
                with server._lock:
                    rec.outcome = "hanging"
                server._stop.wait(server.hang_s)
                self._drop()
                server._finish(rec, "hang")
                return
            reply = server.respond(rec)
            if reply is None:
                self._drop()
                server._finish(rec, "drop")
                return
            try:
                self._reply(reply)
            except OSError:
                server._finish(rec, "client-gone")
                return
            outcome = reply.outcome if reply.status == 200 else f"http-{reply.status}"
            server._finish(rec, outcome, reply.text)

        def _reply(self, reply: Reply) -> None:
            self._send(reply.status, reply.data(), "application/json", reply.headers)

    return Handler


def serve_main(cls: type[FakeProvider], argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=f"serve a {cls.__name__} on 127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    args = parser.parse_args(argv)
    server = cls(latency_s=args.latency).start()
    serve_until_interrupted(server.base_url, server.stop)
