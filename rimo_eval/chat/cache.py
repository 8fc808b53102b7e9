"""A content-addressed response cache: one SQLite database (WAL mode) of zstd-compressed
entries, keyed by the sha256 of the request.

The key is the sha256 of the canonical JSON of everything that determines the reply: the
endpoint identity chosen by the transport, the model, the messages, the sampling parameters
and ``extra_body``; never the API key. Each entry stores the full request next to the reply and
is only served when that request equals the one asked for, so an entry under the wrong key is
a miss, never a wrong answer; so is one whose bytes do not decompress (zstd frames carry a
checksum) or parse. Failed requests are never cached.

Why SQLite in WAL mode (and not packs or LMDB): it is in the standard library, one database
file (plus its ``-wal`` and ``-shm``) however many entries, opening it reads a page, not a
folder of entries, and it is safe for several processes at once (the ``dvc queue`` workers
share the cache): each ``put`` is one transaction that another process sees whole or not at
all, and a ``kill -9`` at any instant leaves the last committed state, never a torn entry.
Entries are zstd level 3: about 15x faster than zlib -6 at the same ratio on reply text
(144 us against 2.3 ms per 34 KB reply here), which matters because ``put`` runs on the event
loop.

Durability against a power cut is batched, as it was with one file per entry: ``put`` commits
without an fsync (``synchronous=NORMAL``: the commit is in the WAL, in the page cache, so a
process kill loses nothing ``put`` returned from); ``sync`` fsyncs the WAL and the folder
(never the database file: see ``sync``), making every commit so far durable, and the
engine calls it in a worker thread every ``SYNC_EVERY_S`` and once more before a run ends.
A power cut loses at most the entries of the last interval, and SQLite rolls a torn WAL tail
back, so the worst case is a request sent again.

Several processes share one cache (``dvc queue`` workers, a sweep's experiments): each request
is sent by one of them and the others wait for its reply (``rimo_eval.chat.leases``). If two
replies to one request arrive anyway (a lease taken over from a stalled process), the first
stored stays and ``put`` hands it back to the second, so every run shows the same reply.

A damaged file (a page that does not read as SQLite wrote it) stops whoever meets it with
``cache_db.DamagedCache``, which names the repair: ``rimo-eval cache verify --recover``. A
lookup is not quietly turned into a miss: that would pay for the request again and then fail
on the write.

The folder lives outside DVC's outputs on purpose, so every
``dvc exp run`` shares it; a relative one is resolved against the main working tree, so queued
runs share it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard

from rimo_eval.chat import cache_db
from rimo_eval.chat.cache_db import FORMAT, is_damage
from rimo_eval.errors import StageError
from rimo_eval.io.atomic import fsync_dir, fsync_path
from rimo_eval.io.hashing import canonical_json, fingerprint
from rimo_eval.io.workspace import shared_path

DB_NAME = "responses.sqlite3"
SYNC_EVERY_S = 1.0  # a power cut loses at most this much of a run's replies
LEVEL = 3
_INSERT = "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)"


def request_key(request: dict[str, Any]) -> str:
    return fingerprint(request)


def labels(request: dict[str, Any]) -> tuple[str, str]:
    """``(model, endpoint)`` of a cache payload (``{"endpoint", "request"[, "sample"]}``), for
    stats and prune; ``""`` where the payload does not say."""
    endpoint = request.get("endpoint")
    endpoint = endpoint if isinstance(endpoint, dict) else {}
    inner = request.get("request")
    inner = inner if isinstance(inner, dict) else request
    model = inner.get("model")
    if not isinstance(model, str):  # the in-process model: its file is its name
        model = f"sha256:{str(endpoint.get('model_sha256', ''))[:12]}" \
            if endpoint.get("model_sha256") else ""
    where = endpoint.get("base_url") or endpoint.get("transport") or ""
    return model, str(where)


@dataclass(frozen=True)
class Entry:
    """One stored entry as ``entries`` yields it; ``request``/``response`` are None when its
    data does not decode (a corrupt entry)."""
    key: str
    model: str
    endpoint: str
    created: float
    size: int
    stored: int
    request: dict[str, Any] | None
    response: dict[str, Any] | None


class ResponseCache:
    """``root=None`` disables caching (every lookup misses, nothing is written). Nothing is
    created until the first ``put``. ``readonly`` (``--estimate``) opens the database read-only
    and touches no file: not even the WAL a reader would otherwise create and remove."""

    def __init__(self, root: str | os.PathLike[str] | None, readonly: bool = False) -> None:
        self.root = shared_path(root) if root is not None else None
        self.readonly = readonly
        self.hits = 0
        self.misses = 0
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # one connection, used from the loop and a worker thread
        self._unsynced: list[str] = []
        self.unread_wal: str | None = None  # read-only: a WAL it could not read (see cache_db)
        self._compress = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)

    @property
    def db_path(self) -> Path:
        assert self.root is not None
        return self.root / DB_NAME

    def connection(self, create: bool = False) -> sqlite3.Connection | None:
        """The open database (None: disabled, or absent and ``create`` false)."""
        if self._conn is not None or self.root is None:
            return self._conn
        if not create and not self.db_path.exists():
            return None
        if self.readonly:
            self._conn = self._open_readonly()
            return self._conn
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._not_writable(exc) from None
        try:
            conn = cache_db.connect(self.db_path)
        except sqlite3.DatabaseError as exc:
            raise self._unreadable(exc) from None
        try:
            cache_db.open_schema(conn, self.db_path)
            # SQLite opens a file it may not write read-only without a word, and the first
            # put would then fail after its request was paid for: said now instead.
            why = cache_db.read_only(self.db_path)
            if why is not None:
                raise cache_db.read_only_error(self.db_path, why)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise self._unreadable(exc) from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _not_writable(self, exc: OSError) -> StageError:
        why = cache_db.read_only(self.db_path)
        if why is not None:
            return cache_db.read_only_error(self.db_path, why)
        return StageError(f"{self.root}: the response cache folder cannot be made "
                          f"({exc.strerror or exc})")

    def _unreadable(self, exc: sqlite3.DatabaseError) -> StageError:
        if is_damage(exc):
            return cache_db.damaged(self.db_path, exc, note=not self.readonly)
        why = cache_db.read_only(self.db_path)
        if why is not None:  # SQLite says "unable to open database file": not damage
            return cache_db.read_only_error(self.db_path, why)
        return StageError(f"{self.db_path}: not a readable response cache ({exc}); "
                          f"{cache_db.repair_hint(self.db_path.parent)}")

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Turn a damaged page met inside the block into ``DamagedCache`` (no traceback)."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise self.damage(exc) from None

    def damage(self, exc: sqlite3.DatabaseError) -> StageError:
        """``DamagedCache`` for a damaged page; any other database error (a full disk, a lock
        held past the busy timeout) as a ``StageError`` naming the file: no traceback."""
        if is_damage(exc):
            return cache_db.damaged(self.db_path, exc, note=not self.readonly)
        why = None if self.readonly else cache_db.read_only(self.db_path)
        if why is not None:  # made read-only while open
            return cache_db.read_only_error(self.db_path, why)
        return StageError(f"{self.db_path}: the response cache failed: {exc}")

    def data_version(self) -> int:
        """Changes whenever another connection commits (cheap: no page is read)."""
        conn = self.connection()
        return 0 if conn is None else conn.execute("PRAGMA data_version").fetchone()[0]

    def _open_readonly(self) -> sqlite3.Connection:
        # Writes no file: not even the WAL and -shm a reader would otherwise create. With no
        # WAL file the database file is the whole state and is read as immutable; a writer
        # starting meanwhile is not seen (a snapshot, which is what an estimate is).
        try:
            conn, self.unread_wal = cache_db.connect_readonly(self.db_path)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise self._unreadable(exc) from None
        if version != FORMAT:
            conn.close()
            raise StageError(f"{self.db_path}: response cache format {version}, this "
                             f"rimo-eval reads format {FORMAT}")
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def get(self, key: str, request: dict[str, Any]) -> dict[str, Any] | None:
        entry = self._load(key)
        if (entry is None or canonical_json(entry.get("request")) != canonical_json(request)
                or not isinstance(entry.get("response"), dict)):
            self.misses += 1
            return None
        self.hits += 1
        response: dict[str, Any] = entry["response"]
        return response

    def put(self, key: str, request: dict[str, Any], response: dict[str, Any],
            created: float | None = None) -> dict[str, Any]:
        """Store one entry: one transaction, committed without an fsync (see ``sync``).
        Returns the reply now stored: ``response``, or the one another process stored first
        under this key (it stays: a second reply never replaces a good first one)."""
        if self.root is None or self.readonly:
            return response
        try:  # (not ``guard()``: a generator-based context costs µs on every request)
            with self._lock:
                return self._put_locked(key, request, response, created)
        except sqlite3.DatabaseError as exc:
            raise self.damage(exc) from None

    def _put_locked(self, key: str, request: dict[str, Any], response: dict[str, Any],
                   created: float | None = None) -> dict[str, Any]:
        """``put`` under ``_lock``."""
        data = canonical_json({"request": request, "response": response}).encode("utf-8")
        model, endpoint = labels(request)
        blob = self._compress.compress(data)
        conn = self.connection(create=True)
        assert conn is not None
        row = (key, model, endpoint, time.time() if created is None else created, len(data),
               blob)
        try:
            conn.execute(_INSERT, row)
        except sqlite3.IntegrityError:  # stored meanwhile by another process, or corrupt
            first = conn.execute("SELECT data FROM entries WHERE key = ?", (key,)).fetchone()
            entry = decode(first[0]) if first else None
            if entry is not None and canonical_json(entry.get("request")) == canonical_json(
                    request):
                stored: dict[str, Any] = entry["response"]
                return stored
            conn.execute(_INSERT.replace("INSERT", "INSERT OR REPLACE"), row)
        self._unsynced.append(key)
        return response

    def take_unsynced(self) -> list[str]:
        """The keys written since the last call (for ``sync`` in another thread)."""
        with self._lock:
            taken, self._unsynced = self._unsynced, []
        return taken

    def sync(self, keys: list[str] | None = None) -> None:
        """Make ``keys`` (default: everything written since the last ``take_unsynced``)
        durable: an fsync of the WAL, where the commits are, and of the folder.

        Never of the database file itself: closing any descriptor of it drops every POSIX
        lock this process holds on it, SQLite's included, after which another process closing
        the cache believes it was the last one, folds the WAL in and deletes it, and every
        later commit of this process goes to a deleted file (lost, and its checkpoints then
        write stale pages). SQLite fsyncs the database after each checkpoint itself
        (``synchronous=NORMAL``), so the WAL is all a commit needs."""
        keys = self.take_unsynced() if keys is None else keys
        if not keys or self.root is None:
            return
        wal = self.root / f"{DB_NAME}-wal"
        try:
            fsync_path(wal)
        except FileNotFoundError:  # no WAL right after a checkpoint
            pass
        except OSError as exc:  # EIO, ENOSPC: the commits may not be on disk, say so
            raise StageError(f"{wal}: the response cache could not be made durable "
                             f"({exc.strerror or exc}); {len(keys)} replies stored since the "
                             f"last sync may be lost after a power cut, and requested again"
                             ) from None
        fsync_dir(self.root)  # a file system that cannot fsync a folder is no error

    def __len__(self) -> int:
        conn = self.connection()
        return 0 if conn is None else conn.execute("SELECT count(*) FROM entries").fetchone()[0]

    def entries(self, where: str = "", args: tuple[Any, ...] = ()) -> Iterator[Entry]:
        """Every stored entry in key order, decoded (a few at a time: bounded memory)."""
        conn = self.connection()
        if conn is None:
            return
        rows = conn.execute("SELECT key, model, endpoint, created, size, data FROM entries "
                            f"{where} ORDER BY key", args)
        while batch := rows.fetchmany(256):
            for key, model, endpoint, created, size, data in batch:
                entry = decode(data)
                yield Entry(key, model, endpoint, created, size, len(data),
                            entry["request"] if entry else None,
                            entry["response"] if entry else None)

    def _load(self, key: str) -> dict[str, Any] | None:
        try:
            with self._lock:
                conn = self.connection()
                row = None if conn is None else conn.execute(
                    "SELECT data FROM entries WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise self.damage(exc) from None
        return None if row is None else decode(row[0])


def decode(data: bytes) -> dict[str, Any] | None:
    """An entry's ``{"request", "response"}``, or None for bytes that do not decode."""
    try:
        entry = json.loads(zstandard.ZstdDecompressor().decompress(data))
    except (zstandard.ZstdError, UnicodeDecodeError, ValueError, TypeError):
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("response"), dict):
        return None
    return entry
