"""Replies no honest server sends, to test that every reply is bounded (issue 42 §3).

``Encoded`` and ``Trickle`` write themselves on a loopback handler (``ChatServer.shape`` may
return one; ``RawServer`` answers every POST with one): a body sent with a
``Content-Encoding`` (a gzip bomb), and a body sent one byte every ``every_s`` seconds, so that
no read ever waits long but the reply never ends. ``gzip_bomb`` and ``deep_json`` build the
bodies. ``RawServer`` is for the transports whose SDK picks its own paths (``/v1/messages``,
``/v1beta/models/...``): every GET gets a small JSON 404 at once (their probe), every POST the
reply.
"""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from tests.support.chat_server import Written
from tests.support.loopback import LoopbackFake, LoopbackHandler

MiB = 1 << 20


def gzip_bomb(decoded_bytes: int) -> bytes:
    """A gzip body of ``decoded_bytes`` zeros (about 1000:1), built a MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: the gzip container
    zeros = bytes(MiB)
    whole, rest = divmod(decoded_bytes, MiB)
    parts = [packer.compress(zeros) for _ in range(whole)]
    return b"".join([*parts, packer.compress(bytes(rest)), packer.flush()])


def deep_json(depth: int) -> bytes:
    """``[[[...]]]``, ``depth`` arrays deep: valid JSON past any recursive parser's limit."""
    return b"[" * depth + b"]" * depth


@dataclass(frozen=True)
class Encoded:
    """``body`` as it is, announced as ``encoding`` (``gzip``): the client inflates it."""

    body: bytes
    encoding: str = "gzip"
    status: int = 200

    def write(self, handler: LoopbackHandler, stop: threading.Event) -> None:
        handler._send(self.status, self.body, "application/json",
                      {"Content-Encoding": self.encoding})


@dataclass(frozen=True)
class Trickle:
    """The headers at once, then ``body`` one byte every ``every_s`` seconds, until the client
    leaves (a write then fails) or the server stops (``OSError`` too: no reply was given)."""

    body: bytes
    every_s: float

    def write(self, handler: LoopbackHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(self.body)))
        handler.end_headers()
        for i in range(len(self.body)):
            if stop.wait(self.every_s):
                raise ConnectionAbortedError("the server stopped mid-reply")
            handler.wfile.write(self.body[i:i + 1])
            handler.wfile.flush()


@dataclass
class RawServer(LoopbackFake):
    """Every POST gets ``reply``; every GET a JSON 404 (an SDK's probe passes at once).
    ``posts``: when each POST arrived and when its reply ended (a trickle: when a write found
    the client gone, within a byte's interval of its leaving)."""

    reply: Written

    def __post_init__(self) -> None:
        super().__post_init__()
        self.posts: list[tuple[float, float]] = []  # (arrived, the reply ended or failed)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(LoopbackHandler):
            def do_GET(self) -> None:
                self._send(404, b'{"error": {"message": "not found"}}', "application/json")

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                arrived = time.monotonic()
                try:
                    fake.reply.write(self, fake._stop)
                except OSError:  # the client gave up: what is being tested
                    self.close_connection = True
                with fake._lock:
                    fake.posts.append((arrived, time.monotonic()))

        return Handler
