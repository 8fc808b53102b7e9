"""Single flight across processes: two predicts (two ``dvc queue`` workers) on one cache send a
request once, and the other waits for the stored reply.

In the cache's own database, no server: before sending, a process claims the request with a
row in ``leases`` (one statement that also checks that no reply is stored; a process that
finds a live lease waits instead of sending). Storing the reply deletes the lease in the same
statement (a trigger), so a waiter sees the lease or the reply, never neither until the owner
gives up. A process registers once in ``owners`` (host, pid, start time) and a thread of its
own refreshes its ``heartbeat`` every ``HEARTBEAT_S``: one write a second for all its leases,
nothing per request.

A lease ends when its owner is gone: at once when the owner ran on this host and its pid is
dead, a zombie or another process by now (``kill -9``); else once its heartbeat is
``LEASE_S`` old (a process stopped with SIGSTOP, or in another pid namespace). Whoever waits
then takes it over with one conditional update (one taker wins) and sends the request itself.
A stopped owner that resumes still finishes what it had in flight, so a stall past
``LEASE_S`` costs at most its in-flight requests twice; the reply stored first stays, and the
late one is dropped for it (``ResponseCache.put``), so every table shows the same reply.

Waiting costs one query per ``POLL_S`` for all the keys this process waits for, skipped when
no other connection has committed since (``PRAGMA data_version``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from rimo_eval.chat import cache_db
from rimo_eval.chat.transport import Superseded

if TYPE_CHECKING:
    from rimo_eval.chat.cache import ResponseCache

HEARTBEAT_S = 1.0
LEASE_S = 5.0  # a heartbeat this old: its owner is stopped or gone
POLL_S = 0.02  # how often a waiting process looks for the replies it waits for
LIVENESS_EVERY_S = 0.2  # how often it checks the owners of those leases
FORGET_OWNER_S = 3600.0  # an owner row this old is removed (its process never closed)

CLAIMED, STORED, HELD = "claimed", "stored", "held"

_CLAIM = """INSERT INTO leases (key, owner, claimed) SELECT ?, ?, ?
    WHERE NOT EXISTS (SELECT 1 FROM entries WHERE key = ?) ON CONFLICT (key) DO NOTHING"""
_TAKE = """UPDATE leases SET owner = ?, claimed = ? WHERE key = ? AND owner = ?
    AND NOT EXISTS (SELECT 1 FROM entries WHERE key = ?)"""
_STATE = """SELECT (SELECT owner FROM leases WHERE key = ?),
    EXISTS (SELECT 1 FROM entries WHERE key = ?)"""


def _stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def identity() -> tuple[str, int, int]:
    """``(host, pid, start time)`` of this process; host includes the pid namespace, so that a
    pid is only checked where it names the same process."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    fields = _stat("self")
    started = int(fields[19]) if fields and len(fields) > 19 else 0
    return f"{socket.gethostname()} {namespace}", os.getpid(), started


def alive(pid: int, started: int) -> bool:
    """Whether the process ``pid`` that started at ``started`` (0: unknown) still runs."""
    fields = _stat(pid)
    if fields is None:
        if started:  # /proc readable for ourselves: the pid is gone
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if fields[0] == "Z":  # killed, not yet reaped
        return False
    return not started or len(fields) <= 19 or int(fields[19]) == started


class Leases:
    """This process's leases in ``cache`` (its connection and lock; the heartbeat has its
    own connection). Nothing is written until the first ``claim``."""

    def __init__(self, cache: ResponseCache) -> None:
        self.cache = cache
        self.owner = uuid.uuid4().hex
        self.host, self.pid, self.started = identity()
        self._registered = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- this process's side ------------------------------------------------------------------
    def claim(self, key: str, take_from: str | None = None) -> tuple[str, str | None]:
        """``(CLAIMED, None)``: send it; ``(STORED, None)``: a reply is stored, read it;
        ``(HELD, owner)``: ``owner`` is sending it, wait (``until_settled``). ``take_from``:
        the owner whose lease expired, taken over if nobody took it first."""
        cache = self.cache
        now = time.time()
        try:  # (not ``cache.guard()``: this runs once per request sent)
            with cache._lock:
                conn = cache.connection(create=True)
                assert conn is not None
                if not self._registered:
                    self._register(conn, now)
                while True:
                    if take_from is not None and conn.execute(
                            _TAKE, (self.owner, now, key, take_from, key)).rowcount == 1:
                        return CLAIMED, None
                    if conn.execute(_CLAIM, (key, self.owner, now, key)).rowcount == 1:
                        return CLAIMED, None
                    owner, stored = conn.execute(_STATE, (key, key)).fetchone()
                    if owner is not None:
                        return HELD, owner
                    if stored:
                        return STORED, None
                    take_from = None  # released between the two statements: claim again
        except sqlite3.DatabaseError as exc:
            raise cache.damage(exc) from None

    def check(self, key: str) -> None:
        """Raise ``Superseded`` unless this process still holds the lease on ``key`` (called
        before a retry: the reply may be stored, or the lease taken over, meanwhile)."""
        with self.cache.guard(), self.cache._lock:
            conn = self.cache.connection()
            row = None if conn is None else conn.execute(
                "SELECT owner FROM leases WHERE key = ?", (key,)).fetchone()
        if row is None or row[0] != self.owner:
            raise Superseded(key)

    def release(self, key: str) -> None:
        """Give up a lease without a reply (the request failed): a waiter sends it."""
        with contextlib.suppress(sqlite3.Error), self.cache._lock:
            conn = self.cache.connection()
            if conn is not None:
                conn.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, self.owner))

    def close(self) -> None:
        """Drop this process's leases and owner row, stop the heartbeat (at the end of a run,
        also a failed one: a damaged file is left as it is)."""
        if not self._registered:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with contextlib.suppress(sqlite3.Error), self.cache._lock:
            conn = self.cache.connection()
            if conn is not None:
                conn.execute("DELETE FROM leases WHERE owner = ?", (self.owner,))
                conn.execute("DELETE FROM owners WHERE owner = ?", (self.owner,))
        self._registered = False

    def _register(self, conn: sqlite3.Connection, now: float) -> None:
        conn.execute("INSERT OR REPLACE INTO owners VALUES (?, ?, ?, ?, ?)",
                     (self.owner, self.host, self.pid, self.started, now))
        # Rows of processes that never closed, long ago: nobody else removes them.
        conn.execute("DELETE FROM leases WHERE owner IN (SELECT owner FROM owners "
                     "WHERE heartbeat < ?)", (now - FORGET_OWNER_S,))
        conn.execute("DELETE FROM owners WHERE heartbeat < ?", (now - FORGET_OWNER_S,))
        self._registered = True
        self._thread = threading.Thread(target=self._beat, name="rimo-cache-heartbeat",
                                        daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        conn = cache_db.connect(self.cache.db_path)
        try:
            while not self._stop.wait(HEARTBEAT_S):
                with contextlib.suppress(sqlite3.Error):  # a missed beat: LEASE_S allows four
                    now = time.time()
                    if conn.execute("UPDATE owners SET heartbeat = ? WHERE owner = ?",
                                    (now, self.owner)).rowcount == 0:
                        conn.execute("INSERT OR REPLACE INTO owners VALUES (?, ?, ?, ?, ?)",
                                     (self.owner, self.host, self.pid, self.started, now))
        finally:
            conn.close()

    # -- the others' side ---------------------------------------------------------------------
    def poll(self, waiting: Mapping[str, str], check_owners: bool) -> dict[str, str | None]:
        """For the waited keys (key -> owner of its lease) whose wait is over: None when the
        lease is gone (the reply is stored, or the owner gave up: claim again), the owner when
        it is gone or stopped (take the lease over). ``check_owners``: look at the owners too
        (else only at the leases)."""
        with self.cache.guard(), self.cache._lock:
            conn = self.cache.connection()
            assert conn is not None
            held: dict[str, str] = {}
            keys = list(waiting)
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                held.update(conn.execute(
                    f"SELECT key, owner FROM leases WHERE key IN ({','.join('?' * len(chunk))})",
                    chunk).fetchall())
            dead = self._gone(conn, set(held.values())) if check_owners else set()
        out: dict[str, str | None] = {}
        for key in keys:
            owner = held.get(key)
            if owner is None:
                out[key] = None
            elif owner in dead:
                out[key] = owner
        return out

    def _gone(self, conn: sqlite3.Connection, owners: Iterable[str]) -> set[str]:
        owners = [o for o in owners if o != self.owner]
        if not owners:
            return set()
        rows = conn.execute("SELECT owner, host, pid, started, heartbeat FROM owners WHERE "
                            f"owner IN ({','.join('?' * len(owners))})", owners).fetchall()
        now = time.time()
        gone = set(owners) - {r[0] for r in rows}  # no owner row: nobody will store it
        for owner, host, pid, started, heartbeat in rows:
            if now - heartbeat > LEASE_S or (host == self.host and not alive(pid, started)):
                gone.add(owner)
        return gone


class Waits:
    """The keys this process waits for, and one polling task for all of them."""

    def __init__(self, leases: Leases) -> None:
        self.leases = leases
        self._waiting: dict[str, tuple[str, asyncio.Future[str | None]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def until_settled(self, key: str, owner: str) -> str | None:
        """Wait until ``owner``'s lease on ``key`` is over: None when it is gone (claim
        again), the owner's id when it expired (take it over)."""
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiting[key] = (owner, future)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll())
        try:
            return await future
        finally:
            self._waiting.pop(key, None)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _poll(self) -> None:
        version, checked = None, 0.0
        while self._waiting:
            await asyncio.sleep(POLL_S)
            now = time.monotonic()
            check_owners = now - checked >= LIVENESS_EVERY_S
            try:
                seen = self.leases.cache.data_version()
                if seen == version and not check_owners:
                    continue  # nobody else committed anything: no lease ended
                version = seen
                if check_owners:
                    checked = now
                over = self.leases.poll({k: o for k, (o, _) in self._waiting.items()},
                                        check_owners)
            except Exception as exc:  # a damaged cache: every waiter gets the error
                for _owner, future in self._waiting.values():
                    if not future.done():
                        future.set_exception(exc)
                return
            for key, result in over.items():
                _owner, future = self._waiting.pop(key)
                if not future.done():
                    future.set_result(result)
