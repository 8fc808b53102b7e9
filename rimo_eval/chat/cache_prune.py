"""``rimo-eval cache prune``: delete entries in bounded transactions and give the space back.

Why in batches: deleting half a million entries in one transaction put the whole change in
the write-ahead log (1.21 GB at a million entries), and a ``kill -9`` then left that WAL for
the next open to read (370 ms). Here each transaction deletes ``BATCH`` entries, re-checking
the filter, and a checkpoint follows every few batches, so the WAL holds a few batches. Smaller
batches cost little more in all: the entries are deleted in rowid order, so their table pages
come in sequence and only the key index is touched at random, about one page per entry
whatever the batch. A kill between two batches leaves every entry whole, either kept or
deleted, the tallies matching (their triggers run in the same transaction); running the same
prune again finishes the job.

Why ``synchronous = NORMAL`` throughout, and a checkpoint every ``CHECKPOINT_EVERY``
transactions (issue 42 §7). Until then the batches ran with ``synchronous = OFF``: a checkpoint
then copies pages into the database file without first making the WAL durable, and a power
cut or kernel crash during the prune could leave the file damaged (a fault test that rebuilds
the files as a cut leaves them, unsynced writes kept or dropped at random, found a cut that
broke the freelist and put a table's rows out of order). In WAL mode ``NORMAL`` cannot damage the
file, whatever is lost: a checkpoint fsyncs the WAL before it copies pages in and the file
before the WAL is reused; a cut loses at most the transactions since the last checkpoint,
each a whole batch, and the same prune run again finishes the job.

What ``OFF`` bought was time: the rows go in rowid order, so every entry rewrites about one page
of the key index at random (keys are hashes: a batch of 500 touches about 500 of its ~25,000
pages at a million entries), about 2 MiB of WAL per batch, 2 GB for half a million entries
whatever the batch size or the checkpoint cadence (bigger transactions share few pages, and a
checkpoint is cheap next to the bytes: the cadence changed the time less than one run's noise,
``benchmarks/README.md``). ``OFF`` never made those bytes reach the disk during the prune; now
each checkpoint does. SQLite's own checkpoints (after each 1,000 pages) are off meanwhile: ours
come every ``CHECKPOINT_EVERY`` batches and after each vacuum step, so the WAL holds about 8 MiB
at most, which is what a ``kill -9`` leaves for the next open to read (about 0.5 ms per MiB on
a quiet machine: the first open after a killed prune stays within the 5 ms of issue 30). A dense
batch (the usual prune by age) is deleted as a rowid range: one walk along the table instead
of 500 look-ups.

Why a loop of ``incremental_vacuum``: Python's ``execute`` steps that pragma once, which frees
a single page (a prune of 737 MiB shrank the file by 4,096 bytes); ``executescript`` runs it to
the end, ``VACUUM_PAGES`` pages per transaction. A database created before auto-vacuum was on
keeps its size: the result says so (a full ``VACUUM``, with nothing else using the cache, is
the way out).
"""

from __future__ import annotations

import sqlite3
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rimo_eval.chat import cache_db

BATCH = 500  # entries per transaction: about 500 pages of WAL
CHECKPOINT_EVERY = 4  # batches between two checkpoints: a WAL of about 8 MiB at most
VACUUM_PAGES = 1024  # pages given back per transaction (4 MiB moved, about 8 MiB of WAL)

Tick = Callable[[int], None]
Progress = Callable[[str, int | None], Tick]


def quiet(label: str, total: int | None) -> Tick:
    return lambda n: None


@dataclass
class Filter:
    """What to delete: SQL clauses over ``entries`` (ANDed) and their values; ``uses_key``:
    a clause reads the key (else the label index holds every column the clauses read)."""
    clauses: list[str]
    values: tuple[Any, ...]
    uses_key: bool = False

    @property
    def sql(self) -> str:
        return " AND ".join(self.clauses)


@dataclass
class Pruned:
    entries: int = 0
    stored_bytes: int = 0
    by: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    freed_pages: int = 0
    vacuum: str = "incremental"

    def add(self, model: str, endpoint: str, created: float, size: int, stored: int) -> None:
        group = self.by.setdefault((model, endpoint), {
            "model": model, "endpoint": endpoint, "entries": 0, "stored_bytes": 0,
            "reply_bytes": 0, "oldest": created, "newest": created})
        group["entries"] += 1
        group["stored_bytes"] += stored
        group["reply_bytes"] += size
        group["oldest"] = min(group["oldest"], created)
        group["newest"] = max(group["newest"], created)
        self.entries += 1
        self.stored_bytes += stored

    def groups(self) -> list[dict[str, Any]]:
        return [self.by[k] for k in sorted(self.by)]


def doomed(conn: sqlite3.Connection, where: Filter, progress: Progress = quiet) -> array[int]:
    """The rowids matching the filter, ascending: read from an index (the label index when
    the filter does not read the key), never from the replies."""
    tick = progress("finding entries", None)
    index = "" if where.uses_key else " INDEXED BY entries_by_label"
    rows = conn.execute(f"SELECT rowid FROM entries{index} WHERE {where.sql}", where.values)
    found: array[int] = array("q")
    while batch := rows.fetchmany(10_000):
        found.extend(r[0] for r in batch)
        tick(len(batch))
    return array("q", sorted(found))


def measure(conn: sqlite3.Connection, rowids: array[int], where: Filter,
            progress: Progress = quiet) -> Pruned:
    """What deleting ``rowids`` would delete (a dry run)."""
    out = Pruned()
    tick = progress("measuring", len(rowids))
    for start in range(0, len(rowids), BATCH):
        chunk = list(rowids[start:start + BATCH])
        for row in conn.execute(
                "SELECT model, endpoint, created, size, length(data) FROM entries WHERE "
                f"rowid IN ({','.join('?' * len(chunk))}) AND {where.sql}",
                (*chunk, *where.values)):
            out.add(*row)
        tick(len(chunk))
    return out


def delete(conn: sqlite3.Connection, rowids: array[int], where: Filter,
           progress: Progress = quiet) -> Pruned:
    """Delete ``rowids`` (those still matching the filter), ``BATCH`` per transaction, then
    give the freed pages back to the file system. ``synchronous`` stays ``NORMAL``: see the
    module docstring."""
    out = Pruned()
    conn.execute("PRAGMA secure_delete = OFF")  # no zeroing of pages the vacuum cuts off
    auto = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # ours, every CHECKPOINT_EVERY batches
    try:
        tick = progress("deleting", len(rowids))
        for n, start in enumerate(range(0, len(rowids), BATCH), 1):
            chunk = rowids[start:start + BATCH]
            for row in conn.execute(*_delete_sql(chunk, where)).fetchall():
                out.add(*row)
            if n % CHECKPOINT_EVERY == 0:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            tick(len(chunk))
        out.freed_pages, out.vacuum = vacuum(conn, progress)
    finally:
        conn.execute(f"PRAGMA wal_autocheckpoint = {auto}")
    checkpoint(conn)
    return out


def _delete_sql(chunk: array[int], where: Filter) -> tuple[str, tuple[Any, ...]]:
    """One batch's statement: a rowid range where the batch is dense in it (the usual prune
    by age: one walk along the table, no list of 500 values to look up one by one), else the
    list of its rowids."""
    returning = "RETURNING model, endpoint, created, size, length(data)"
    if chunk[-1] - chunk[0] < 2 * len(chunk):
        return (f"DELETE FROM entries WHERE rowid BETWEEN ? AND ? AND {where.sql} "
                f"{returning}", (chunk[0], chunk[-1], *where.values))
    return (f"DELETE FROM entries WHERE rowid IN ({','.join('?' * len(chunk))}) AND "
            f"{where.sql} {returning}", (*chunk, *where.values))


def vacuum(conn: sqlite3.Connection, progress: Progress = quiet) -> tuple[int, str]:
    """Give the free pages back, ``VACUUM_PAGES`` per transaction; ``(pages, how)``."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # not INCREMENTAL
        return 0, "none (the database was created without auto-vacuum)"
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    tick = progress("giving space back", free)
    freed = 0
    while free:
        conn.executescript(f"PRAGMA incremental_vacuum({min(free, VACUUM_PAGES)});")
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # a step: about 8 MiB of WAL
        left = conn.execute("PRAGMA freelist_count").fetchone()[0]
        if left >= free:  # nothing more can go (another process holds them): stop
            break
        tick(free - left)
        freed += free - left
        free = left
    return freed, "incremental"


def checkpoint(conn: sqlite3.Connection, wait_s: float = 5.0) -> None:
    """Fold the WAL into the database and cut it to nothing, waiting a little for readers."""
    deadline = time.monotonic() + wait_s
    conn.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
    try:
        while True:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy or time.monotonic() > deadline:
                return
            time.sleep(0.05)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {cache_db.BUSY_TIMEOUT_MS}")
