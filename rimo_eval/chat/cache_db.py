"""The response cache's SQLite file: how a connection is opened, the schema, and what counts
as damage.

Tables:

* ``entries``: one reply per request (see ``rimo_eval.chat.cache``); its columns never change, so
  an older rimo-eval keeps reading and writing a cache a newer one upgraded.
* ``served``: what each server reported last about the weights behind a model name
  (``rimo_eval.chat.served``).
* ``leases`` and ``owners``: the cross-process single flight (``rimo_eval.chat.leases``). A lease
  row says which process is sending a request; the trigger ``entries_settle_lease`` deletes it
  in the very statement that stores the reply, so a waiter sees either the lease or the reply.
* ``tallies``: entries, stored and reply bytes per (model, endpoint), kept by triggers in the
  statement that changes ``entries``, so ``cache stats`` reads a few rows instead of every
  entry (13.9 s at a million entries when it summed the table); ``entries_by_label`` gives the
  oldest and newest entry of each label and lets ``prune --older-than`` find its rows without
  reading the replies. ``INSERT OR REPLACE`` fires the delete trigger only under
  ``recursive_triggers`` (on in our connections; an older rimo-eval on another SQLite build may
  not set it): ``stats`` checks the tallies against ``count(*)`` and recounts them if they
  drifted.

A new database gets the whole schema. A database made by an older version gets the lease
and ``served`` tables at its first open (instant), and the tallies and their index from the
first ``cache`` command (one pass over the entries, said on stderr), never from ``predict``,
whose open must stay a few milliseconds.

The write-ahead log is bounded: ``journal_size_limit`` truncates it after a checkpoint, and
every long job (prune, recovery, upgrade) commits in bounded transactions, so the WAL a
``kill -9`` leaves behind, which the next open must read whole, stays a few megabytes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from rimo_eval.errors import StageError
from rimo_eval.io.atomic import write_text

FORMAT = 2  # PRAGMA user_version of the database; 1 was the per-file layout
BUSY_TIMEOUT_MS = 120_000  # another process's transaction is short; a long wait is a bug
JOURNAL_SIZE_LIMIT = 32 * 2**20  # the WAL file is cut back to this after a checkpoint

ENTRIES = """CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY NOT NULL,  -- sha256 of the canonical request (never an API key)
    model TEXT NOT NULL,            -- for stats and prune only; the request says it all
    endpoint TEXT NOT NULL,
    created REAL NOT NULL,          -- unix time of the put
    size INTEGER NOT NULL,          -- uncompressed bytes
    data BLOB NOT NULL)             -- zstd(canonical JSON {"request", "response"})"""

LEASES = """
CREATE TABLE IF NOT EXISTS owners (
    owner TEXT PRIMARY KEY NOT NULL,  -- a random id per process and run
    host TEXT NOT NULL,               -- host name and pid namespace: where ``pid`` means it
    pid INTEGER NOT NULL,
    started INTEGER NOT NULL,         -- the process's start (clock ticks after boot): pid reuse
    heartbeat REAL NOT NULL           -- unix time of its last sign of life
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
    key TEXT PRIMARY KEY NOT NULL,    -- a request being sent, not yet stored
    owner TEXT NOT NULL,              -- the process sending it
    claimed REAL NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS entries_settle_lease AFTER INSERT ON entries BEGIN
    DELETE FROM leases WHERE key = NEW.key;
END;
CREATE TABLE IF NOT EXISTS served (
    model TEXT NOT NULL,              -- the labels of ``entries``
    endpoint TEXT NOT NULL,
    identity TEXT NOT NULL,           -- canonical JSON: what the server reported last
    since REAL NOT NULL,              -- unix time it was first reported
    PRIMARY KEY (model, endpoint)
) WITHOUT ROWID;
"""

TALLIES = """
CREATE TABLE IF NOT EXISTS tallies (
    model TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    entries INTEGER NOT NULL,
    stored INTEGER NOT NULL,          -- compressed bytes (length of data)
    size INTEGER NOT NULL,            -- uncompressed bytes
    PRIMARY KEY (model, endpoint)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS entries_tally_insert AFTER INSERT ON entries BEGIN
    INSERT INTO tallies VALUES (NEW.model, NEW.endpoint, 1, length(NEW.data), NEW.size)
    ON CONFLICT (model, endpoint) DO UPDATE SET entries = entries + 1,
        stored = stored + excluded.stored, size = size + excluded.size;
END;
CREATE TRIGGER IF NOT EXISTS entries_tally_delete AFTER DELETE ON entries BEGIN
    UPDATE tallies SET entries = entries - 1, stored = stored - length(OLD.data),
        size = size - OLD.size WHERE model = OLD.model AND endpoint = OLD.endpoint;
END;
CREATE TRIGGER IF NOT EXISTS entries_tally_update AFTER UPDATE ON entries BEGIN
    UPDATE tallies SET entries = entries - 1, stored = stored - length(OLD.data),
        size = size - OLD.size WHERE model = OLD.model AND endpoint = OLD.endpoint;
    INSERT INTO tallies VALUES (NEW.model, NEW.endpoint, 1, length(NEW.data), NEW.size)
    ON CONFLICT (model, endpoint) DO UPDATE SET entries = entries + 1,
        stored = stored + excluded.stored, size = size + excluded.size;
END;
CREATE INDEX IF NOT EXISTS entries_by_label ON entries (model, endpoint, created);
"""
RECOUNT = """INSERT INTO tallies SELECT model, endpoint, count(*), sum(length(data)), sum(size)
    FROM entries GROUP BY model, endpoint"""


class DamagedCache(StageError):
    """The database file is damaged (a page that does not read as SQLite wrote it)."""


def is_damage(exc: BaseException) -> bool:
    """SQLITE_CORRUPT or SQLITE_NOTADB: the file, not a busy lock or a bad statement."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    return "malformed" in str(exc) or "not a database" in str(exc)


class ReadOnlyCache(StageError):
    """The cache's folder or files cannot be written (a read-only mount, a folder or file
    without write permission or marked immutable): no repair applies, nothing is damaged."""


def read_only(db: Path) -> str | None:
    """Why the cache ``db`` cannot be written where it is, or None. Checked after a failure or
    before a command that writes (cheap: a ``statvfs`` and a few ``access`` calls, which see a
    read-only mount and an immutable file even for root)."""
    root = db.parent
    try:
        if os.statvfs(root).f_flag & os.ST_RDONLY:
            return "its file system is mounted read-only"
    except OSError:  # no folder yet: its parent decides
        parent = next((p for p in root.parents if p.exists()), None)
        if parent is not None and not os.access(parent, os.W_OK):
            return f"{parent} is not writable"
        return None
    if not os.access(root, os.W_OK):
        return "its folder is not writable"
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if path.exists() and not os.access(path, os.W_OK):
            return f"{path.name} is not writable"
    return None


def read_only_error(db: Path, why: str, doing: str = "") -> ReadOnlyCache:
    """The one message for a cache that cannot be written: what to do instead of a repair."""
    doing = f", {doing}" if doing else ""
    return ReadOnlyCache(
        f"{db}: the response cache is read-only ({why}){doing}; make the folder and its "
        f"files writable, or point cache_dir (predict.<backend>.cache_dir, judge.cache_dir or "
        f"--dir) at a writable folder: a copy of this one (`cp -a {db.parent} NEW`) keeps its "
        f"replies")


def connect_readonly(db: Path) -> tuple[sqlite3.Connection, str | None]:
    """A connection that writes nothing, not even the ``-shm`` a WAL reader makes: with no WAL
    file the database file is the whole state and is read as immutable; with one, SQLite's
    ``mode=ro``, else (a read-only folder without the ``-shm``, which SQLite cannot make)
    immutable too, the WAL left unread. Returns the connection and, in that last case, a note
    naming the unread WAL. Raises ``sqlite3.DatabaseError`` for a file that does not open."""
    wal = Path(f"{db}-wal")
    base = f"{db.resolve().as_uri()}?mode=ro"
    if wal.exists():
        conn = _connect_uri(base)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the WAL
            return conn, None
        except sqlite3.OperationalError as exc:
            conn.close()
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_CANTOPEN or read_only(db) is None:
                raise
    size = wal.stat().st_size if wal.exists() else 0
    note = (f"{wal.name} ({size} bytes) is not read (a read-only folder without its -shm "
            f"file): the replies committed there are not seen") if size else None
    conn = _connect_uri(base + "&immutable=1")
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn, note


def _connect_uri(uri: str) -> sqlite3.Connection:
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                           isolation_level=None, check_same_thread=False)


def repair_hint(root: Path) -> str:
    return f"run `rimo-eval cache verify --recover --dir {root}`"


def note_path(db: Path) -> Path:
    """Where the damage met by anyone is noted (``cache stats`` reads only a few pages, so it
    names damage found by predict or verify from here; ``--recover`` removes it)."""
    return db.with_name(f"{db.name}.damage")


def damaged(db: Path, exc: BaseException | str, note: bool = True) -> DamagedCache:
    """The one message every command and stage gives for a damaged cache; the damage is
    noted beside the database unless ``note`` is false (a read-only run)."""
    if note:
        with contextlib.suppress(OSError):
            write_text(note_path(db), f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {exc}\n")
    return DamagedCache(
        f"{db}: the response cache is damaged ({exc}); {repair_hint(db.parent)}: it copies "
        f"every readable entry into a new database and sets the damaged file aside")


def noted(db: Path) -> str | None:
    """The damage noted earlier, if any."""
    try:
        return note_path(db).read_text(encoding="utf-8").strip() or "noted earlier"
    except OSError:
        return None


def connect(path: Path, *, timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """A read-write connection with the cache's settings (the file must be one already)."""
    conn = sqlite3.connect(path, timeout=timeout_ms / 1000, isolation_level=None,
                           check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        conn.execute("PRAGMA recursive_triggers = ON")  # REPLACE keeps the tallies right
    except BaseException:
        conn.close()
        raise
    return conn


def for_maintenance(conn: sqlite3.Connection) -> None:
    """Settings for a long cache command's own connection (never a run's): pages read
    through a memory map and a 64 MiB page cache. A prune of half a million entries read
    8.7 million pages one pread at a time with the default 2 MiB cache (60 s at a million
    entries; 36 s so)."""
    conn.execute("PRAGMA mmap_size = 2147418112")  # the largest this SQLite build allows
    conn.execute("PRAGMA cache_size = -65536")


def names(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}


def open_schema(conn: sqlite3.Connection, db: Path) -> None:
    """Make a new database (WAL, incremental vacuum, the whole schema) or check an existing
    one's format and add the lease tables it may lack."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    have = names(conn)
    if version == FORMAT and {"leases", "owners", "entries_settle_lease", "served"} <= have:
        return  # the usual open: two reads of the first page and the schema
    if version not in (0, FORMAT):
        raise StageError(f"{db}: response cache format {version}, this rimo-eval reads "
                         f"format {FORMAT}; use another cache_dir")
    if version == 0 and "entries" not in have:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only takes before the first table
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")  # two processes creating it at once: one does
    try:
        fresh = "entries" not in names(conn)
        conn.execute(ENTRIES)
        for statement in _statements(LEASES + (TALLIES if fresh else "")):
            conn.execute(statement)
        if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
            conn.execute(f"PRAGMA user_version = {FORMAT}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def has_tallies(conn: sqlite3.Connection) -> bool:
    return {"tallies", "entries_by_label", "entries_tally_insert", "entries_tally_delete",
            "entries_tally_update"} <= names(conn)


def add_tallies(conn: sqlite3.Connection, progress: Callable[[int], None] | None = None
                ) -> bool:
    """Give a database of an older version its tallies and label index (one pass over the
    entries, one transaction: its triggers must see every later change). Returns whether
    there was anything to do."""
    if has_tallies(conn):
        return False
    with _progress_handler(conn, progress):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not has_tallies(conn):
                conn.execute("DROP TABLE IF EXISTS tallies")
                for statement in _statements(TALLIES):
                    conn.execute(statement)
                conn.execute(RECOUNT)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return True


def recount(conn: sqlite3.Connection, progress: Callable[[int], None] | None = None) -> None:
    """Recount the tallies from the entries (they drifted: see the module docstring)."""
    with _progress_handler(conn, progress):
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM tallies")
            conn.execute(RECOUNT)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


class _progress_handler:
    """Calls ``progress(1)`` every so many SQLite VM steps of a long statement (a sign of life
    for a bar whose total is unknown)."""

    def __init__(self, conn: sqlite3.Connection, progress: Callable[[int], None] | None):
        self.conn, self.progress = conn, progress

    def __enter__(self) -> None:
        if self.progress is not None:
            tick = self.progress
            self.conn.set_progress_handler(lambda: tick(1) or 0, 1_000_000)

    def __exit__(self, *exc: object) -> None:
        self.conn.set_progress_handler(None, 0)


def _statements(script: str) -> list[str]:
    """The statements of a script (triggers keep their inner semicolons)."""
    out, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text and sqlite3.complete_statement(text):
            out.append(text)
            current = []
    return out
