"""A content-addressed response cache: one JSON file per request, named by its sha256.

The key is the sha256 of the canonical JSON of everything that determines the reply: the
endpoint identity chosen by the transport, the model, the messages, the sampling parameters
and ``extra_body``; never the API key. Each entry also stores the full request and is only
served when that request equals the one asked for, so a renamed, copied or corrupt file is a
miss, never a wrong answer. Entries are written atomically (temporary file, rename), so a
``kill -9`` leaves either no entry or a complete one, and an unreadable entry is simply
re-fetched and rewritten. Failed requests are never cached.

Durability against a power cut is batched: ``put`` does not fsync (once per request it was
most of the engine's system time at 64 connections); ``sync`` makes everything written since
the last call durable (one ``syncfs`` of the cache's filesystem on Linux, else an fsync per
file and folder), and the engine calls it in a worker thread every ``SYNC_EVERY_S`` and once
more before a run ends. ``syncfs`` is kept because it pays: 1579 replies at c = 64 took
4.2 s with an fsync each and 2.5 s with it (``benchmarks/engine_tuning.py``). A
process kill loses nothing that ``put`` returned from (the entry is in the page cache); a power
cut loses at most the entries of the last interval, and a torn one reads as a miss, so the
worst case is a request sent again, never a wrong answer. The temporary file of a writer
killed before its rename is removed when a cache is next opened (see ``clean_stale``).

The folder lives outside DVC's outputs on purpose, so every ``dvc exp run`` shares it; a
relative one is resolved against the main working tree, so queued runs share it too.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from stages.core.atomic import fsync_path
from stages.core.hashing import canonical_json, fingerprint
from stages.core.shared import shared_path

FORMAT = 1
# A temporary file this old is stale even if its writer's pid is alive (the pid may be reused).
STALE_AFTER_S = 600.0
SYNC_EVERY_S = 1.0  # a power cut loses at most this much of a run's replies
# syncfs(2), where the C library has it (Linux); None elsewhere: an fsync per file instead.
_SYNCFS = (getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
           if sys.platform.startswith("linux") else None)


def request_key(request: dict[str, Any]) -> str:
    return fingerprint(request)


class ResponseCache:
    """``root=None`` disables caching (every lookup misses, nothing is written)."""

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        self.root = shared_path(root) if root is not None else None
        self.hits = 0
        self.misses = 0
        self._folders: set[Path] = set()
        self._unsynced: list[Path] = []
        if self.root is not None:
            clean_stale(self.root)

    def path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"  # sharded so no folder grows huge

    def get(self, key: str, request: dict[str, Any]) -> dict[str, Any] | None:
        entry = self._read(key)
        if (entry is None or entry.get("format") != FORMAT or entry.get("key") != key
                or canonical_json(entry.get("request")) != canonical_json(request)
                or not isinstance(entry.get("response"), dict)):
            self.misses += 1
            return None
        self.hits += 1
        return entry["response"]

    def put(self, key: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        """Write one entry: temporary file, rename (no fsync: see ``sync``).

        Lighter than ``stages.atomic`` on purpose (compact JSON, no fsync): this runs once per
        request, hundreds of times a second, on the event loop.
        """
        if self.root is None:
            return
        target = self.path(key)
        if target.parent not in self._folders:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._folders.add(target.parent)
        data = canonical_json({"format": FORMAT, "key": key, "request": request,
                               "response": response}).encode("utf-8")
        # The writer's pid is in the name, so a later start can tell a dead writer's file; the
        # rest of the key makes it unique within this process (one writer per key).
        tmp = target.parent / f".{key[:16]}.{os.getpid()}.{key[16:32]}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._unsynced.append(target)

    def take_unsynced(self) -> list[Path]:
        """The entries written since the last call (for ``sync`` in another thread)."""
        taken, self._unsynced = self._unsynced, []
        return taken

    def sync(self, paths: list[Path] | None = None) -> None:
        """Make ``paths`` (default: everything written since the last ``take_unsynced``) and
        their folders durable, so that a power cut cannot take them back."""
        paths = self.take_unsynced() if paths is None else paths
        if not paths or self.root is None:
            return
        if _SYNCFS is not None:  # one journal commit for the whole batch
            fd = os.open(self.root, os.O_RDONLY)
            try:
                if _SYNCFS(fd) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"syncfs: {os.strerror(err)}", str(self.root))
            finally:
                os.close(fd)
            return
        for path in paths:
            with contextlib.suppress(FileNotFoundError):  # replaced by another writer
                fsync_path(path)
        # A shard folder made since the last sync is an entry of the root.
        for folder in {p.parent for p in paths} | {self.root}:
            fsync_path(folder)

    def _read(self, key: str) -> dict[str, Any] | None:
        if self.root is None:
            return None
        try:
            entry = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None  # absent, unreadable or torn: a miss, rewritten after the request
        return entry if isinstance(entry, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process, or not a pid we can ask about: keep the file
    return True


def clean_stale(root: Path, max_age_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove temporary entry files left by killed writers: those whose writer pid is dead, or
    older than ``max_age_s``. A live concurrent writer's file is young and its pid alive, so it
    is left alone. Returns what was removed."""
    removed = []
    now = time.time()
    for tmp in root.glob("*/.*.tmp"):
        parts = tmp.name.split(".")  # "", key prefix, pid, random part, "tmp"
        pid = int(parts[2]) if len(parts) == 5 and parts[2].isdigit() else None
        try:
            old = now - tmp.stat().st_mtime > max_age_s
        except FileNotFoundError:
            continue  # its writer renamed it meanwhile
        if old or (pid is not None and not _alive(pid)):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
                removed.append(tmp)
    return removed
