"""What every loopback fake server of the tests shares: free ports, the server's life in a thread,
the ``[[directive:arg]]`` syntax, and the request log.

``LoopbackFake`` is the base of every fake: ``start()`` binds a free loopback port (below the
ephemeral range, see below) and serves ``handler()`` in a daemon thread; ``stop()`` wakes any
handler waiting on ``_stop`` and closes the socket. ``RecordingFake`` adds the request log of
the fake model APIs (``chat_server.ChatServer``, ``fake_provider.FakeProvider``): every request
is a record with its attempt number (arrivals of that exact body) and outcome; ``answered()``
counts the complete replies per distinct body, so a test can assert that nothing answered was
sent again; ``hang_after``: once that many were answered, later requests hang.
"""

from __future__ import annotations

import contextlib
import errno
import random
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, TypeVar

_DIRECTIVE = re.compile(r"\[\[(\w+)(?::([^\]]*))?\]\]")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# Test servers listen on ports below the kernel's ephemeral range. A Jupyter kernel (the report
# stage) gets its five ports by binding port 0 and closing, and binds them a second later
# (jupyter/jupyter_client#487); a server on the other xdist worker binding port 0 in that second
# could take one and kill the kernel. Below the range no port-0 bind or outgoing connection
# ever lands. In-process servers (bound at once: two picking one port just try another) and
# ports handed to a server process (free now, bound by it later) take separate halves, so a
# test server never takes a port that a starting process (SeaweedFS, llama.cpp) was given.
_LOW = _ephemeral_low()
_BOUND = range(max(1024, _LOW - 12000), max(1024, _LOW - 6000))
_HANDED = range(max(1024, _LOW - 6000), _LOW)
_random = random.SystemRandom()
T = TypeVar("T")


def bind_loopback(make: Callable[[tuple[str, int]], T], ports: range = _BOUND) -> T:
    """``make(("127.0.0.1", port))`` (a server that binds in its constructor) on a free port."""
    for _ in range(100):
        try:
            return make(("127.0.0.1", _random.choice(ports)))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    raise RuntimeError(f"no free loopback port in {ports}")


def free_ports(n: int) -> list[int]:
    """n distinct loopback ports free now (held open together), for a server process that
    binds them itself."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(bind_loopback(socket.create_server, _HANDED))
                 for _ in range(n)]
        return [sock.getsockname()[1] for sock in socks]


def free_port() -> int:
    return free_ports(1)[0]


def directives(prompt: str) -> dict[str, str]:
    """The ``[[name:arg]]`` markers in ``prompt`` (``[[name]]``: an empty arg)."""
    return {m.group(1): m.group(2) or "" for m in _DIRECTIVE.finditer(prompt)}


def first_k(arg: str, attempt: int, *, default: str = "1") -> bool:
    """Whether a directive whose arg is K (``*``: always) applies to the ``attempt``-th
    arrival of a request."""
    arg = arg or default
    return arg == "*" or attempt <= int(arg)


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default 5 drops SYNs when 64+ clients connect at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing an idle keep-alive connection with a reset (aiohttp does, at
        # session close) is routine, not a server error worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionResetError):
            super().handle_error(request, client_address)


def serve_until_interrupted(base_url: str, stop: Callable[[], None]) -> None:
    """A fake run as a process (benchmarks): print its URL, serve until Ctrl-C, then stop."""
    print(base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        stop()
        sys.exit(0)


class LoopbackHandler(BaseHTTPRequestHandler):
    """What the fakes' request handlers share: keep-alive as real servers do, no access log, a
    reply in one write, and a dropped connection."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, code: int, data: bytes, ctype: str,
              headers: Mapping[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self._headers_buffer.append(b"\r\n")  # headers and body in one write
        self._headers_buffer.append(data)
        self.flush_headers()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class LoopbackFake:
    """A fake server on 127.0.0.1 serving ``handler()`` in a daemon thread.

    A plain class whose ``__post_init__`` the dataclass subclasses' ``__init__`` calls (a
    subclass that defines its own calls ``super().__post_init__()``).
    """

    server_class: ClassVar[type[ThreadingHTTPServer]] = LoopbackServer

    def __post_init__(self) -> None:
        self._lock: threading.Lock | threading.RLock = threading.Lock()
        self._stop = threading.Event()  # set by stop(): releases handlers waiting on it
        self._httpd: ThreadingHTTPServer | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def start(self, port: int = 0) -> Self:
        """``port``: reuse a dead server's port, so that the base URL (and cache keys) match."""
        handler, make = self.handler(), self.server_class
        httpd = make(("127.0.0.1", port), handler) if port else bind_loopback(
            lambda addr: make(addr, handler))
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        self._httpd = httpd
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "not started"
        return int(self._httpd.server_address[1])


class Logged(Protocol):
    """What ``RecordingFake`` needs of a record of one request."""

    key: str  # the request's body fingerprint
    started: float
    attempt: int
    outcome: str
    reply: str | None
    finished: float | None



class RecordingFake(LoopbackFake):
    """A ``LoopbackFake`` that logs every request in ``records`` (a dataclass field of the
    subclass) with its attempt number and outcome."""

    records: list[Any]
    hang_after: int | None

    def __post_init__(self) -> None:
        super().__post_init__()
        self._attempts: Counter[str] = Counter()
        self._answered = 0

    def reset(self) -> None:
        with self._lock:
            self.records.clear()
            self._attempts.clear()
            self._answered = 0

    def answered(self) -> Counter[str]:
        """How many complete replies each distinct request (by body) received."""
        with self._lock:
            return Counter(r.key for r in self.records if r.outcome == "ok")

    def ok_records(self) -> list[Any]:
        with self._lock:
            return sorted((r for r in self.records if r.outcome == "ok"),
                          key=lambda r: r.started)

    def _begin(self, record: Logged) -> bool:
        """Log a request that arrived; True when it must hang (``hang_after`` reached)."""
        with self._lock:
            self.records.append(record)
            self._attempts[record.key] += 1
            record.attempt = self._attempts[record.key]
            return self.hang_after is not None and self._answered >= self.hang_after

    def _finish(self, record: Logged, outcome: str, reply: str | None = None,
                at: float | None = None) -> None:
        with self._lock:
            record.outcome, record.reply = outcome, reply
            record.finished = time.monotonic() if at is None else at
            if outcome == "ok":
                self._answered += 1
