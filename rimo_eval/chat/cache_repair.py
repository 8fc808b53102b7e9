"""``rimo-eval cache verify [--recover]``: check every entry, and rebuild a damaged database
from whatever still reads.

The entries are read by rowid ranges: a range that meets a damaged page is split in halves
down to single rows, so one bad page costs the rows on it, not the rest of the walk (a plain
``SELECT`` stops at the first bad page). ``recover`` copies every readable entry that decodes
and sits under its own request's key into a new database next to the old one, then sets the
damaged file aside (``responses.sqlite3.damaged-<time>``, its WAL with it) and moves the new
one into place with one rename, after which nothing of the old file is used: a kill before the
rename leaves the damaged database where it was, and running it again starts over. It refuses
while another process is sending requests through the cache (its owner row is alive).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rimo_eval.chat import cache_db
from rimo_eval.chat.cache import DB_NAME, decode
from rimo_eval.chat.cache_prune import Progress, checkpoint, quiet
from rimo_eval.chat.leases import LEASE_S, alive, identity
from rimo_eval.errors import StageError
from rimo_eval.io.atomic import fsync_path
from rimo_eval.io.hashing import fingerprint

CHUNK = 256  # rowids per read
_COLUMNS = "rowid, key, model, endpoint, created, size, data"
Row = tuple[int, str, str, str, float, int, bytes]


@dataclass
class Walk:
    """Every readable row of ``entries``; ``unreadable`` counts the rowids whose page did not
    read (an upper bound of the rows lost there: some rowids were never used)."""
    conn: sqlite3.Connection
    unreadable: int = 0
    errors: list[str] = field(default_factory=list)

    def rows(self, progress: Progress = quiet) -> Iterator[Row]:
        lo, hi = self._bounds()
        tick = progress("reading entries", self.expected())
        for start in range(lo, hi + 1, CHUNK):
            count = 0
            for row in self._range(start, min(start + CHUNK - 1, hi)):
                count += 1
                yield row
            tick(count)

    def _range(self, a: int, b: int) -> Iterator[Row]:
        try:
            rows = self.conn.execute(f"SELECT {_COLUMNS} FROM entries WHERE rowid BETWEEN ? "
                                     "AND ? ORDER BY rowid", (a, b)).fetchall()
        except sqlite3.DatabaseError as exc:
            if not cache_db.is_damage(exc):
                raise
            if a == b:
                self.unreadable += 1
                if len(self.errors) < 10:
                    self.errors.append(f"rowid {a}: {exc}")
                return
            mid = (a + b) // 2
            yield from self._range(a, mid)
            yield from self._range(mid + 1, b)
            return
        yield from rows

    def _bounds(self) -> tuple[int, int]:
        for sql in ("SELECT min(rowid), max(rowid) FROM entries",  # the table's edges
                    "SELECT min(rowid), max(rowid) FROM entries "  # else the key index
                    "INDEXED BY sqlite_autoindex_entries_1"):
            with contextlib.suppress(sqlite3.DatabaseError):
                lo, hi = self.conn.execute(sql).fetchone()
                return (lo, hi) if lo is not None else (1, 0)
        guess = self.expected() or 0
        self.errors.append(f"the rowid range does not read: rows 1 to {4 * guess + 2**16} "
                           "were tried")
        return 1, 4 * guess + 2**16

    def expected(self) -> int | None:
        """How many entries the database says it holds: by its key index, else its tallies
        (None if neither reads)."""
        for sql in ("SELECT count(*) FROM entries INDEXED BY sqlite_autoindex_entries_1",
                    "SELECT sum(entries) FROM tallies"):
            with contextlib.suppress(sqlite3.DatabaseError):
                count = self.conn.execute(sql).fetchone()[0]
                if count is not None:
                    return int(count)
        return None


def problem(key: str, data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """``(entry, None)`` for a good entry, ``(None, what is wrong)`` for a bad one."""
    entry = decode(data)
    if entry is None:
        return None, "does not decode (corrupt data)"
    if fingerprint(entry.get("request")) != key:
        return None, "stored under another request's key"
    return entry, None


def quick_check(conn: sqlite3.Connection, progress: Progress = quiet) -> str:
    """SQLite's structural check of every page ("ok", or what it found)."""
    tick = progress("checking pages", None)
    conn.set_progress_handler(lambda: tick(1) or 0, 1_000_000)
    try:
        found = [r[0] for r in conn.execute("PRAGMA quick_check(20)")]
    except sqlite3.DatabaseError as exc:
        if not cache_db.is_damage(exc):
            raise
        found = [f"unreadable: {exc}"]
    finally:
        conn.set_progress_handler(None, 0)
    return "; ".join(found)


def open_damaged(db: Path) -> sqlite3.Connection | None:
    """A connection that changes nothing (no schema upgrade), or None if the file does not
    open as a database at all."""
    return open_checked(db, False)[0]


def open_checked(db: Path, readonly: bool) -> tuple[sqlite3.Connection | None, str | None]:
    """``open_damaged``; ``readonly``: a connection that writes no file either (a read-only
    folder: ``cache_db.connect_readonly``), and its note on a WAL it could not read."""
    conn, note = None, None
    try:
        if readonly:
            conn, note = cache_db.connect_readonly(db)
        else:
            conn = cache_db.connect(db)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        if not cache_db.is_damage(exc):
            raise
        return None, None
    return conn, note


def verify(db: Path, delete_bad: bool, progress: Progress = quiet) -> dict[str, Any]:
    """Check every page and every entry. ``damaged``: pages that do not read. A read-only
    cache is checked read-only (``read_only`` says why, ``unread`` names a WAL it could not
    read); deleting its bad entries is refused."""
    why = cache_db.read_only(db) if db.exists() else None
    conn, unread = open_checked(db, why is not None) if db.exists() else (None, None)
    if conn is None:
        if not db.exists():
            return {"entries": 0, "bad": [], "integrity": "ok", "deleted": 0, "unreadable": 0,
                    "damaged": False, "expected": 0}
        cache_db.damaged(db, "the file does not open as a database")
        return {"entries": 0, "bad": [], "integrity": "the file does not open as a database",
                "deleted": 0, "unreadable": None, "damaged": True, "expected": None}
    try:
        integrity = quick_check(conn, progress)
        walk = Walk(conn)
        bad, count = [], 0
        for _rowid, key, _m, _e, _c, _s, data in walk.rows(progress):
            count += 1
            _entry, wrong = problem(key, data)
            if wrong:
                bad.append({"key": key, "problem": wrong})
        damaged = integrity != "ok" or walk.unreadable > 0
        if damaged:
            cache_db.damaged(db, integrity if integrity != "ok" else walk.errors[0])
        deleted = 0
        if delete_bad and bad:
            if damaged:
                raise StageError(f"{db}: the database is damaged, so bad entries are not "
                                 f"deleted one by one; {cache_db.repair_hint(db.parent)}")
            if why is not None:
                raise cache_db.read_only_error(db, why, f"so its {len(bad)} bad entries "
                                               f"cannot be deleted")
            conn.executemany("DELETE FROM entries WHERE key = ?", [(b["key"],) for b in bad])
            deleted = len(bad)
        out = {"entries": count, "bad": bad, "integrity": integrity, "deleted": deleted,
               "unreadable": walk.unreadable, "damaged": damaged,
               "expected": walk.expected(), "errors": walk.errors}
        if why is not None:
            out.update(read_only=why, unread_wal=unread)
        return out
    finally:
        conn.close()


def live_users(conn: sqlite3.Connection) -> list[str]:
    """The processes sending requests through this cache now (by their owner rows)."""
    try:
        rows = conn.execute("SELECT host, pid, started, heartbeat FROM owners").fetchall()
    except sqlite3.DatabaseError:
        return []
    host, now = identity()[0], time.time()
    return [f"pid {pid}" + ("" if h == host else f" on {h.split()[0]}")
            for h, pid, started, beat in rows
            if now - beat <= LEASE_S and (h != host or alive(pid, started))]


def recover(db: Path, progress: Progress = quiet) -> dict[str, Any]:
    """Copy every readable good entry into a new database, set the old file aside, put the
    new one in its place. Returns the counts and where the old file went."""
    root = db.parent
    why = cache_db.read_only(db)
    if why is not None:  # before anything is made: nothing is left behind
        raise cache_db.read_only_error(db, why, "so it cannot be rebuilt in place (`cache "
                                       "verify` without --recover checks it read-only)")
    new = root / f"{DB_NAME}.recovering"
    made = (new, Path(f"{new}-wal"), Path(f"{new}-shm"))
    for leftover in made:  # a killed recovery's
        leftover.unlink(missing_ok=True)
    try:
        return _recover(db, new, progress)
    except BaseException:
        for leftover in made:  # a refusal or failure leaves nothing behind
            with contextlib.suppress(OSError):
                leftover.unlink(missing_ok=True)
        raise


def _recover(db: Path, new: Path, progress: Progress) -> dict[str, Any]:
    """``recover`` once the new file's name is free."""
    root = db.parent
    old = open_damaged(db) if db.exists() else None
    recovered = dropped = 0
    expected: int | None = 0 if old is None and not db.exists() else None
    unreadable: int | None = None
    target = cache_db.connect(new)
    try:
        cache_db.open_schema(target, new)
        if old is not None:
            users = live_users(old)
            if users:
                raise StageError(f"{db}: {len(users)} process(es) are using this cache now "
                                 f"({', '.join(users)}); stop them and run it again")
            walk = Walk(old)
            expected = walk.expected()
            batch: list[tuple[Any, ...]] = []
            for _rowid, key, model, endpoint, created, size, data in walk.rows(progress):
                if problem(key, data)[1] is not None:
                    dropped += 1
                    continue
                batch.append((key, model, endpoint, created, size, data))
                if len(batch) >= 1000:
                    recovered += _insert(target, batch)
            recovered += _insert(target, batch)
            unreadable = walk.unreadable
            with contextlib.suppress(sqlite3.DatabaseError):  # what the servers reported
                target.executemany("INSERT OR REPLACE INTO served VALUES (?, ?, ?, ?)",
                                   old.execute("SELECT model, endpoint, identity, since FROM "
                                               "served").fetchall())
            with contextlib.suppress(sqlite3.DatabaseError):  # its WAL into the old file
                old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        checkpoint(target)
    finally:
        target.close()
        if old is not None:
            old.close()
    aside = root / f"{DB_NAME}.damaged-{time.strftime('%Y%m%dT%H%M%S')}"
    if db.exists():
        os.link(db, aside)  # both names until the rename: a kill leaves it in place
        for suffix in ("-wal", "-shm"):
            side = Path(f"{db}{suffix}")
            if side.exists():
                os.replace(side, f"{aside}{suffix}")  # never replayed onto the new file
    os.replace(new, db)
    cache_db.note_path(db).unlink(missing_ok=True)
    fsync_path(root)
    # Lost: what the old file said it held and the new one lacks (bad entries included).
    lost = None if expected is None else max(0, expected - recovered)
    return {"recovered": recovered, "expected": expected, "lost": lost, "dropped_bad": dropped,
            "unreadable_rowids": unreadable,
            "set_aside": str(aside) if aside.exists() else None}


def _insert(conn: sqlite3.Connection, batch: list[tuple[Any, ...]]) -> int:
    if not batch:
        return 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        n = sum(conn.execute("INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?, ?)",
                             row).rowcount for row in batch)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    batch.clear()
    return n
