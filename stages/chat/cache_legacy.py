"""The per-file response cache of older versions (format 1): read it, and migrate it once.

That layout kept one JSON file per request, ``ab/abcd....json`` (sharded by the key's first two
hex digits), each ``{"format": 1, "key", "request", "response"}``, written by temporary file
and rename. ``present`` looks only at the cache folder's own names (at most 256 shards), so
it costs O(1) in the number of entries; ``read`` serves one entry with the old checks;
``migrate`` moves every entry into the database, committing before it deletes a file, so a
kill at any point loses nothing and a second run finishes the job.
"""

from __future__ import annotations

import contextlib
import json
import os
import string
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stages.core.hashing import fingerprint

if TYPE_CHECKING:
    from stages.chat.cache import ResponseCache

FORMAT = 1
STALE_AFTER_S = 600.0  # a temporary file this old is stale even if its writer's pid is alive
_HEX = set(string.hexdigits.lower())


def _is_shard(name: str) -> bool:
    return len(name) == 2 and set(name) <= _HEX


def present(root: Path) -> bool:
    """Whether ``root`` holds a shard folder of the per-file layout."""
    try:
        with os.scandir(root) as it:
            return any(e.is_dir() and _is_shard(e.name) for e in it)
    except (FileNotFoundError, NotADirectoryError):
        return False


def path(root: Path, key: str) -> Path:
    return root / key[:2] / f"{key}.json"


def read(root: Path, key: str) -> dict[str, Any] | None:
    """``{"request", "response"}`` of one per-file entry, or None (absent, torn, another
    format or stored under another key)."""
    try:
        entry = json.loads(path(root, key).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if (not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key
            or not isinstance(entry.get("response"), dict)):
        return None
    return entry


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process, or not a pid we can ask about: keep the file
    return True


def clean_stale(root: Path, max_age_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove the temporary files of killed per-file writers (``ab/.<key16>.<pid>.<r>.tmp``):
    those whose pid is dead, or older than ``max_age_s``. Returns what was removed."""
    removed = []
    now = time.time()
    for tmp in root.glob("*/.*.tmp"):
        parts = tmp.name.split(".")  # "", key prefix, pid, random part, "tmp"
        pid = int(parts[2]) if len(parts) == 5 and parts[2].isdigit() else None
        try:
            old = now - tmp.stat().st_mtime > max_age_s
        except FileNotFoundError:
            continue
        if old or (pid is not None and not _alive(pid)):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
                removed.append(tmp)
    return removed


def migrate(cache: ResponseCache, batch: int = 500,
            progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Move every per-file entry into ``cache``'s database and delete the files: entries
    already in the database are kept as they are; a file that does not read as a whole entry
    under its own key is dropped (it was a miss anyway). Returns the counts."""
    assert cache.root is not None
    root = cache.root
    counts = {"moved": 0, "already": 0, "dropped": 0, "temporary": len(clean_stale(root))}
    files = sorted(root.glob("??/*.json"))
    for start in range(0, len(files), batch):
        chunk = files[start:start + batch]
        rows = []
        for file in chunk:
            entry = read(root, file.stem)
            if entry is None or fingerprint(entry.get("request")) != file.stem:
                counts["dropped"] += 1
                continue
            rows.append((file, entry))
        conn = cache.connection(create=True)
        assert conn is not None
        with cache._lock:  # one transaction per batch, committed before any file goes
            conn.execute("BEGIN IMMEDIATE")
            try:
                for file, entry in rows:
                    had = conn.execute("SELECT 1 FROM entries WHERE key = ?",
                                       (file.stem,)).fetchone()
                    if had:
                        counts["already"] += 1
                        continue
                    cache.put_locked(file.stem, entry["request"], entry["response"],
                                     file.stat().st_mtime)
                    counts["moved"] += 1
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        cache.sync()
        for file in chunk:
            with contextlib.suppress(FileNotFoundError):
                file.unlink()
        if progress is not None:
            progress(len(chunk))
    for shard in root.iterdir():
        if shard.is_dir() and _is_shard(shard.name):
            with contextlib.suppress(OSError):  # not empty: a live writer's file
                shard.rmdir()
    cache.legacy = present(root)
    return counts
