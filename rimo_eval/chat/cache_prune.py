"""``rimo-eval cache prune``: delete entries in bounded transactions and give the space back.

Why in batches: deleting half a million entries in one transaction put the whole change in
the write-ahead log (1.21 GB at a million entries), and a ``kill -9`` then left that WAL for
the next open to read (370 ms). Here each transaction deletes ``BATCH`` entries, re-checking
the filter, and is checkpointed at once, so the WAL holds about one batch (a WAL past about
4 MB makes the first open after a kill cost tens of milliseconds, measured here). Smaller
batches cost little more in all: the entries are deleted in rowid order, so their table pages
come in sequence and only the key index is touched at random, about one page per entry
whatever the batch. A kill between two batches leaves every entry whole, either kept or
deleted, the tallies matching (their triggers run in the same transaction); running the same
prune again finishes the job.

Why ``synchronous = OFF`` while it runs: the rows are deleted in rowid order, so every entry
rewrites about one page of the key index, at random (a batch of 500 touches about 500 of its
pages, whatever the order of the batch: keys are hashes). Checkpointed with fsyncs, each batch
forced those pages to the disk, so the prune cost one random synchronous write per entry (at
200,000 entries, load 5-6: 11-16 s against 4.5-4.8 s without; the CPU time is 3.4-4.4 s in
both). A bigger batch does not help: the key index has ~20,000 pages at a million entries,
so a batch shares few of them, and the WAL grows with it (the first open after a kill reads
the WAL: about 1 ms per MiB). Without fsyncs the kernel writes a page back once in a while,
however often the batches rewrite it. This is safe against a killed process (SQLite's
guarantee for ``OFF``: the data handed to the kernel survives the process), not against the
machine itself stopping (a power cut or kernel crash) during the prune: that may damage the
file, and ``verify --recover`` is then the way back. At the end the file is fsynced and the
WAL checkpointed with fsyncs, so a finished prune is as durable as any write.

Why a loop of ``incremental_vacuum``: Python's ``execute`` steps that pragma once, which frees
a single page (a prune of 737 MiB shrank the file by 4,096 bytes); ``executescript`` runs it to
the end, ``VACUUM_PAGES`` pages per transaction. A database created before auto-vacuum was on
keeps its size: the result says so (a full ``VACUUM``, with nothing else using the cache, is
the way out).
"""

from __future__ import annotations

import os
import sqlite3
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rimo_eval.chat import cache_db

BATCH = 500  # entries per transaction: about 500 pages of WAL
VACUUM_PAGES = 512  # pages given back per transaction (2 MiB moved, about 4 MiB of WAL)

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
    give the freed pages back to the file system."""
    out = Pruned()
    conn.execute("PRAGMA secure_delete = OFF")  # no zeroing of pages the vacuum cuts off
    conn.execute("PRAGMA synchronous = OFF")  # see the module docstring
    try:
        tick = progress("deleting", len(rowids))
        for start in range(0, len(rowids), BATCH):
            chunk = list(rowids[start:start + BATCH])
            for row in conn.execute(
                    f"DELETE FROM entries WHERE rowid IN ({','.join('?' * len(chunk))}) AND "
                    f"{where.sql} RETURNING model, endpoint, created, size, length(data)",
                    (*chunk, *where.values)).fetchall():
                out.add(*row)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            tick(len(chunk))
        out.freed_pages, out.vacuum = vacuum(conn, progress)
    finally:
        conn.execute("PRAGMA synchronous = NORMAL")
    durable(conn)
    return out


def durable(conn: sqlite3.Connection) -> None:
    """Make what ``synchronous = OFF`` wrote durable: fsync the database file first (a
    checkpoint with fsyncs skips that when the WAL was already copied in), then checkpoint
    the WAL with fsyncs and cut it."""
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    if path:  # not an in-memory database
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # flushes the file's pages, whichever descriptor wrote them
        finally:
            os.close(fd)
    checkpoint(conn)


def vacuum(conn: sqlite3.Connection, progress: Progress = quiet) -> tuple[int, str]:
    """Give the free pages back, ``VACUUM_PAGES`` per transaction; ``(pages, how)``."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # not INCREMENTAL
        return 0, "none (the database was created without auto-vacuum)"
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    tick = progress("giving space back", free)
    freed = 0
    while free:
        conn.executescript(f"PRAGMA incremental_vacuum({min(free, VACUUM_PAGES)});")
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
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
