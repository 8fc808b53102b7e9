"""Single flight across processes (issue 30 §1): a lease in the shared database makes the others
wait; it ends at once when its holder is killed, after ``LEASE_S`` when it is stopped; the
reply stored first stays; a waiting task gives its slot back; a stalled process does not retry
a request another process has taken over. Real processes where it matters (kill -9, SIGSTOP),
two ``Session`` objects on one cache for the engine's side (each its own connection and owner,
as two processes have)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.chat import cache as cache_module
from rimo_eval.chat import leases as leases_module
from rimo_eval.chat import session as session_module
from rimo_eval.chat.cache import DB_NAME, ResponseCache, request_key
from rimo_eval.chat.errors import ConnectionFailed
from rimo_eval.chat.leases import CLAIMED, HELD, STORED, Leases
from rimo_eval.chat.redact import Redactor
from rimo_eval.chat.retrying import RetryingTransport
from rimo_eval.chat.session import Session
from rimo_eval.chat.transport import ChatReply, ChatTransport, cache_payload
from rimo_eval.errors import StageError
from rimo_eval.params.chat import EngineParams
from tests.support.cache_tools import payload, response
from tests.support.paths import REPO_ROOT

# Claims keys 0..n-1, prints its owner id, waits for a line on stdin, then stores a reply of
# its own for key 0 and prints the text of the reply the cache kept.
_HOLDER = textwrap.dedent("""
    import sys
    from rimo_eval.chat.cache import ResponseCache, request_key
    from rimo_eval.chat.leases import Leases
    from tests.support.cache_tools import payload
    cache = ResponseCache(sys.argv[1])
    leases = Leases(cache)
    for i in range(int(sys.argv[2])):
        assert leases.claim(request_key(payload(i)))[0] == "claimed"
    print(leases.owner, flush=True)
    sys.stdin.readline()
    kept = cache.put(request_key(payload(0)), payload(0), {"texts": ["late"]})
    print(kept["texts"][0][-8:], flush=True)
    leases.close()
""")


def holder(root: Path, n: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(root), str(n)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def key(i: int) -> str:
    return request_key(payload(i))


def test_a_lease_makes_the_others_wait_until_the_reply_is_stored(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    a, b = ResponseCache(root), ResponseCache(root)
    mine, theirs = Leases(a), Leases(b)
    assert mine.claim(key(1)) == (CLAIMED, None)
    assert theirs.claim(key(1)) == (HELD, mine.owner)
    assert theirs.poll({key(1): mine.owner}, check_owners=True) == {}  # alive: keep waiting
    a.put(key(1), payload(1), response(1))  # the same statement ends the lease
    assert theirs.poll({key(1): mine.owner}, check_owners=True) == {key(1): None}
    assert theirs.claim(key(1)) == (STORED, None)
    assert mine.claim(key(2)) == (CLAIMED, None)
    mine.release(key(2))  # the request failed: the next asker sends it
    assert theirs.claim(key(2)) == (CLAIMED, None)
    mine.close()
    theirs.close()
    conn = a.connection()
    assert conn is not None
    assert conn.execute("SELECT count(*) FROM leases").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM owners").fetchone()[0] == 0


def test_a_killed_holders_leases_end_at_once_and_one_taker_wins(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    proc, owner = holder(root, 3)
    watcher, other = Leases(ResponseCache(root)), Leases(ResponseCache(root))
    waiting = {key(i): owner for i in range(3)}
    assert watcher.poll(waiting, check_owners=True) == {}
    os.kill(proc.pid, signal.SIGKILL)
    time.sleep(0.2)
    # Not reaped yet (a zombie): dead all the same, with no heartbeat wait.
    assert proc.poll() is None or proc.returncode == -signal.SIGKILL
    assert watcher.poll(waiting, check_owners=True) == waiting
    proc.wait(timeout=10)
    assert watcher.poll(waiting, check_owners=True) == waiting
    assert watcher.claim(key(0), take_from=owner) == (CLAIMED, None)
    assert other.claim(key(0), take_from=owner) == (HELD, watcher.owner)
    watcher.close()
    other.close()


def test_a_stopped_holder_is_taken_over_after_the_lease_and_its_late_reply_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leases_module, "LEASE_S", 1.5)  # the waiter's side of the rule
    root = tmp_path / "cache"
    proc, owner = holder(root, 1)
    assert proc.stdin is not None and proc.stdout is not None
    cache = ResponseCache(root)
    taker = Leases(cache)
    try:
        time.sleep(1.2)  # a heartbeat or two: the lease lives while its holder beats
        assert taker.poll({key(0): owner}, check_owners=True) == {}
        os.kill(proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        while taker.poll({key(0): owner}, check_owners=True) != {key(0): owner}:
            assert time.monotonic() - stopped < 5, "a stopped holder blocks the others"
            time.sleep(0.05)
        waited = time.monotonic() - stopped
        assert 0.4 < waited < 1.5 + leases_module.HEARTBEAT_S + 0.5
        assert taker.claim(key(0), take_from=owner) == (CLAIMED, None)
        assert cache.put(key(0), payload(0), response(0)) == response(0)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    proc.stdin.write("\n")
    proc.stdin.flush()
    # Resumed, it stores its own reply: the first one stays, and is what it gets back.
    assert proc.stdout.readline().strip() == response(0)["texts"][0][-8:]
    assert proc.wait(timeout=30) == 0
    assert ResponseCache(root).get(key(0), payload(0)) == response(0)
    taker.close()


class Gated(ChatTransport):
    """Replies ``reply to <prompt>``; each send waits for ``gate`` when there is one."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.concurrency, self.gate, self.sent = 1, gate, []

    def endpoint(self) -> dict[str, Any]:
        return {"transport": "gated"}

    def request(self, messages: list[dict[str, str]], sample: int = 0) -> dict[str, Any]:
        return {"model": "m", "messages": messages}

    async def send(self, request: dict[str, Any]) -> ChatReply:
        prompt = request["messages"][0]["content"]
        self.sent.append(prompt)
        if self.gate is not None:
            await self.gate.wait()
        return ChatReply([f"reply to {prompt}"], ["stop"], {}, "m", 0.0)


def session(transport: ChatTransport, root: Path, total: int) -> Session:
    engine = EngineParams(cache_dir=str(root), breaker_window=0, stall_warning_s=None)
    return Session(transport, engine, label="t", section="t", total=total)


async def ask(s: Session, prompt: str) -> ChatReply:
    async with s.slot():
        return (await s.call("t", [{"role": "user", "content": prompt}]))[0]


def test_a_waiting_task_gives_its_slot_back_and_gets_the_other_process_reply(
        tmp_path: Path) -> None:
    root = tmp_path / "cache"

    async def scenario() -> None:
        gate = asyncio.Event()
        a, b = session(Gated(gate), root, 1), session(Gated(), root, 2)
        async with a, b:
            first = asyncio.create_task(ask(a, "q1"))
            while a.transport.sent != ["q1"]:  # type: ignore[attr-defined]
                await asyncio.sleep(0.01)
            waiting = asyncio.create_task(ask(b, "q1"))  # a holds it: b waits
            # b's only slot went back while it waits, so its next request is sent meanwhile.
            other = await asyncio.wait_for(ask(b, "q2"), 5)
            assert other.texts == ["reply to q2"] and not waiting.done()
            gate.set()
            replies = await asyncio.wait_for(asyncio.gather(first, waiting), 5)
        assert replies[0].texts == replies[1].texts == ["reply to q1"]
        assert b.transport.sent == ["q2"]  # type: ignore[attr-defined]
        assert (a.sent["t"], b.sent["t"], b.hits["t"]) == (1, 1, 1)

    asyncio.run(scenario())


class FlakyOnce(RetryingTransport):
    """The first attempt fails (a dropped connection); ``during`` runs just before it fails."""

    def __init__(self, during: Any) -> None:
        super().__init__(section="t", base_url="http://127.0.0.1:9/v1", max_retries=3,
                         backoff_initial_s=0.01, backoff_max_s=0.02, redact=Redactor(""))
        self.concurrency, self.during, self.attempts = 1, during, 0

    def endpoint(self) -> dict[str, Any]:
        return {"transport": "flaky"}

    def request(self, messages: list[dict[str, str]], sample: int = 0) -> dict[str, Any]:
        return {"model": "m", "messages": messages}

    async def _attempt(self, request: dict[str, Any]) -> ChatReply:
        self.attempts += 1
        if self.attempts == 1:
            self.during(request)
            raise ConnectionFailed("dropped")
        return ChatReply(["mine"], ["stop"], {}, "m", 0.0)


def test_a_retry_is_not_sent_once_another_process_took_the_request_over(
        tmp_path: Path) -> None:
    root = tmp_path / "cache"
    other_cache = ResponseCache(root)
    other = Leases(other_cache)
    theirs = {"texts": ["theirs"], "finish_reasons": ["stop"], "usage": {}, "model": "m",
              "latency_s": 0.0, "reasoning": []}

    def take_over(request: dict[str, Any]) -> None:
        # What a waiter does once this process stalled past its lease: take it, store a reply.
        payload_ = cache_payload(transport, request, 0)
        k = request_key(payload_)
        assert other.claim(k, take_from=s.leases.owner) == (CLAIMED, None)  # type: ignore[union-attr]
        other_cache.put(k, payload_, theirs)

    transport = FlakyOnce(take_over)
    s = session(transport, root, 1)

    async def scenario() -> ChatReply:
        async with s:
            return await ask(s, "q")

    reply = asyncio.run(scenario())
    assert transport.attempts == 1  # the retry was not sent: the taker's reply is used
    assert reply.texts == ["theirs"] and s.hits["t"] == 1
    other.close()


def _owner_rows(root: Path) -> tuple[int, int]:
    with contextlib.closing(sqlite3.connect(root / DB_NAME)) as conn:
        return (conn.execute("SELECT count(*) FROM owners").fetchone()[0],
                conn.execute("SELECT count(*) FROM leases").fetchone()[0])


def test_a_failed_sync_stops_the_run_with_a_clear_error_and_its_leases_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fails the WAL's fsync (EIO) during the run and at its end: the run stops
    with a ``StageError`` naming the file (it used to be the bare ``OSError``, a traceback)
    and still ends its leases, its heartbeat and its connection (they used to stay: in a
    notebook another worker waited on them for as long as the kernel lived)."""
    root = tmp_path / "cache"
    real = cache_module.fsync_path

    def failing(path: Any) -> None:
        if str(path).endswith("-wal"):
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
        real(path)

    monkeypatch.setattr(cache_module, "fsync_path", failing)
    monkeypatch.setattr(session_module, "SYNC_EVERY_S", 0.01)  # the periodic sync fails too
    s = session(Gated(), root, 2)

    async def scenario() -> None:
        async with s:
            await ask(s, "q1")
            await asyncio.sleep(0.1)
            await ask(s, "q2")

    with pytest.raises(StageError, match=r"responses\.sqlite3-wal: the response cache could "
                       r"not be made durable \(Input/output error\)"):
        asyncio.run(scenario())
    assert _owner_rows(root) == (0, 0)
    assert s.cache._conn is None
    assert not [t for t in threading.enumerate() if t.name == "rimo-cache-heartbeat"]
    assert len(ResponseCache(root)) == 2  # both replies stored, the file reads


def test_a_failed_sync_does_not_hide_the_runs_own_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def failing(path: Any) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))

    monkeypatch.setattr(cache_module, "fsync_path", failing)
    s = session(Gated(), tmp_path / "cache", 1)

    async def scenario() -> None:
        async with s:
            await ask(s, "q1")
            raise StageError("the run's own error")

    with pytest.raises(StageError, match="the run's own error"):
        asyncio.run(scenario())
    assert "could not be made durable" in capsys.readouterr().err
    assert _owner_rows(tmp_path / "cache") == (0, 0)
