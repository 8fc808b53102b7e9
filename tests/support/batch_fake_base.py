"""What the loopback fake batch APIs share (``fake_batch``: OpenAI's Batch API;
``fake_anthropic_batch``: Anthropic's Message Batches): the server's life, the log and its
never-pay-twice checks, holding a phase so a test can kill the client there, the injected
per-request 5xx, and the JSON request handler.

``log``: every event (``create`` with its ``custom_ids``, ``answer`` with its status,
``cancel``); ``violations``: a create holding a request that is in another live batch, or one
already answered 200. ``hold``: phases whose next request is held unanswered until
``release()`` or ``stop()``; ``held`` is set meanwhile. custom_ids whose request's prompt holds
``[[batch5xx:K]]`` fail in the first K batches that hold them; ``flaky_every``: every n-th
request of each batch fails the first time it is seen.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any, ClassVar

from tests.support.loopback import LoopbackFake, LoopbackHandler

_FIVEXX = re.compile(r"\[\[batch5xx:(\d+)\]\]")


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a held reply to a client killed meanwhile: the broken pipe is the point


@dataclass(kw_only=True)
class BatchFake(LoopbackFake):
    server_class: ClassVar[type[ThreadingHTTPServer]] = _Quiet
    LIVE: ClassVar[tuple[str, ...]] = ()  # the states of a live batch
    STATUS: ClassVar[str] = "status"  # the batch object's state field

    advance_every: int = 1
    expire_next: bool = False
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    hold: set[str] = field(default_factory=set)
    flaky_every: int | None = None  # every n-th request of a batch: a 5xx the first time

    def __post_init__(self) -> None:
        super().__post_init__()
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._lines: dict[str, list[dict[str, Any]]] = {}  # batch id -> its requests
        self._retrieves: Counter[str] = Counter()
        self._seen_5xx: Counter[str] = Counter()
        self.held = threading.Event()
        self._release = threading.Event()

    def _end(self, bid: str) -> None:
        """Finish a live batch now, every request answered."""
        raise NotImplementedError

    def finish_all(self) -> None:
        """End every live batch now (the provider finished while nobody polled)."""
        with self._lock:
            for bid in self.live():
                self._end(bid)

    # -- lifecycle -------------------------------------------------------------------------
    def stop(self) -> None:
        self._release.set()  # a held request goes on, to a closed server
        super().stop()

    def release(self) -> None:
        self._release.set()

    def _maybe_hold(self, kind: str) -> bool:
        """Hold this request if its phase is in ``hold`` (then True)."""
        with self._lock:
            if kind not in self.hold:
                return False
            self.hold.discard(kind)
            self._release.clear()
            self.held.set()
        self._release.wait(120)
        self.held.clear()
        return True

    # -- inspection ------------------------------------------------------------------------
    def answered_ok(self) -> Counter[str]:
        """How many times each custom_id was answered 200 (over all batches)."""
        return Counter(e["custom_id"] for e in self.log
                       if e["event"] == "answer" and e["status"] == 200)

    def live(self) -> list[str]:
        with self._lock:
            return [b for b, obj in self.batches.items() if obj[self.STATUS] in self.LIVE]

    def _custom_ids(self, bid: str) -> list[str]:
        return [line["custom_id"] for line in self._lines[bid]]

    # -- what both APIs do alike -----------------------------------------------------------
    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):06d}"

    def _register(self, bid: str, obj: dict[str, Any], lines: list[dict[str, Any]]) -> None:
        """A new batch: the never-pay-twice checks, then it is live and logged."""
        ids = [line["custom_id"] for line in lines]
        live_ids = {c for b in self.live() for c in self._custom_ids(b)}
        done = set(self.answered_ok())
        for cid in ids:
            if cid in live_ids:
                self.violations.append(f"{bid}: {cid} is in another live batch")
            if cid in done:
                self.violations.append(f"{bid}: {cid} was already answered 200")
        self.batches[bid], self._lines[bid] = obj, lines
        self.log.append({"event": "create", "batch": bid, "custom_ids": ids})

    def _injected_5xx(self, cid: str, prompt: str, n: int) -> bool:
        """Whether the ``n``-th request of a batch fails this time (module docstring)."""
        if self.flaky_every and n % self.flaky_every == 0 and cid not in self._seen_5xx:
            self._seen_5xx[cid] += 1
            return True
        match = _FIVEXX.search(prompt)
        if match:
            self._seen_5xx[cid] += 1
            return self._seen_5xx[cid] <= int(match.group(1))
        return False

    def _answered(self, bid: str, cid: str, status: int) -> None:
        self.log.append({"event": "answer", "batch": bid, "custom_id": cid, "status": status})

    def _cancelled(self, bid: str) -> None:
        self.log.append({"event": "cancel", "batch": bid})


def forward(url: str, data: bytes | None, headers: dict[str, str] | None = None
            ) -> tuple[int, Any]:
    """POST (GET without ``data``) to the fake model; its status and JSON body."""
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, {"error": {"message": raw.decode(errors="replace")}}


class JSONHandler(LoopbackHandler):
    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _json(self, code: int, obj: Any) -> None:
        self._send(code, json.dumps(obj).encode(), "application/json")

    def _missing(self) -> None:
        self._json(404, {"error": {"message": f"not found: {self.path}"}})
