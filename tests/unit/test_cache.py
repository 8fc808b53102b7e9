"""The SQLite response cache keeps every guarantee of the per-file one: a ``kill -9`` never
loses a reply ``put`` returned from nor tears an entry; two processes writing one cache at
once stay correct; a stored request must equal the asked one; a corrupt entry is a miss;
opening creates nothing and scans nothing; ``sync`` makes the commits durable."""

from __future__ import annotations

import errno
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from rimo_eval.chat import cache as cache_module
from rimo_eval.chat.cache import DB_NAME, ResponseCache, labels, request_key
from rimo_eval.errors import StageError
from rimo_eval.io import atomic
from rimo_eval.io.hashing import fingerprint
from tests.support.cache_tools import (
    cache_entries,
    compress,
    payload,
    response,
    set_data,
)
from tests.support.paths import REPO_ROOT

# Writes entries start, start+1, ... (pausing between puts if asked) and prints each index
# once its put has returned.
_WRITER = textwrap.dedent("""
    import sys, time
    from tests.support.cache_tools import payload, response
    from rimo_eval.chat.cache import ResponseCache, request_key
    cache = ResponseCache(sys.argv[1])
    start, stop, pause = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    for i in range(start, stop):
        cache.put(request_key(payload(i)), payload(i), response(i))
        print(i, flush=True)
        time.sleep(pause)
    cache.sync()
""")


def writer(root: Path, start: int, stop: int, pause: float = 0.0) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(root), str(start), str(stop),
                             str(pause)],
                            stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})


def check_whole(root: Path) -> set[int]:
    """Every entry decodes, is under its own key and is the right reply; returns the indexes."""
    cache = ResponseCache(root)
    conn = cache.connection()
    assert conn is not None
    assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
    found = set()
    for entry in cache.entries():
        assert entry.request is not None and fingerprint(entry.request) == entry.key
        i = int(entry.request["request"]["messages"][0]["content"][1:])
        assert entry.response == response(i)
        found.add(i)
    cache.close()
    return found


LIVE_START = 1_000_000  # the live writer's indexes


@pytest.mark.parametrize("live", [False, True], ids=["alone", "beside-a-live-writer"])
def test_kill9_loop_loses_no_returned_put_and_tears_nothing(tmp_path: Path, live: bool) -> None:
    root, rng = tmp_path / "cache", random.Random(20)
    returned: set[int] = set()
    # A second process writing the whole time (issue 30): each kill lands beside its puts.
    other = writer(root, LIVE_START, LIVE_START + 100_000, pause=0.02) if live else None
    theirs: list[int] = []
    if other is not None:
        assert other.stdout is not None
        stream = other.stdout
        threading.Thread(target=lambda: theirs.extend(int(line) for line in stream),
                         daemon=True).start()
    start = 0
    for _ in range(6):
        proc = writer(root, start, start + 100_000)
        assert proc.stdout is not None
        for _ in range(rng.randint(5, 60)):  # then kill it in the middle of its next puts
            returned.add(int(proc.stdout.readline()))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        found = check_whole(root)
        assert returned <= found, f"lost replies: {sorted(returned - found)[:5]}"
        start = max(i for i in found if i < LIVE_START) + 1
    if other is not None:
        assert other.poll() is None, "the live writer ended before the kills did"
        os.kill(other.pid, signal.SIGKILL)
        other.wait(timeout=30)
        found = check_whole(root)
        assert len(theirs) > 10 and set(theirs) <= found
    files = {p.name for p in root.iterdir()}
    assert DB_NAME in files and files <= {DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"}


def test_two_processes_writing_one_cache_stay_correct(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    # Overlapping ranges: 100..199 are written by both, at the same time.
    procs = [writer(root, 0, 200), writer(root, 100, 300)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert [len(o.split()) for o in outs] == [200, 200]
    assert check_whole(root) == set(range(300))
    cache = ResponseCache(root)
    assert len(cache) == 300
    assert all(cache.get(request_key(payload(i)), payload(i)) == response(i) for i in range(300))


def test_the_stored_request_must_equal_the_asked_one(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    key = request_key(payload(1))
    cache.put(key, payload(1), response(1))
    assert cache.get(key, payload(2)) is None  # same key, another request: a miss
    assert cache.get(key, payload(1)) == response(1)
    assert (cache.hits, cache.misses) == (1, 1)


@pytest.mark.parametrize("damage", ["torn", "flipped", "not zstd", "no response", "empty"])
def test_a_corrupt_entry_is_a_miss_and_rewritten(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "cache"
    cache = ResponseCache(root)
    key = request_key(payload(1))
    cache.put(key, payload(1), response(1))
    good = compress({"request": payload(1), "response": response(1)})
    bad = {"torn": good[: len(good) // 2], "flipped": good[:-9] + bytes([good[-9] ^ 1]) + good[-8:],
           "not zstd": b"{\"request\": 1}", "no response": compress({"request": payload(1)}),
           "empty": b""}[damage]
    set_data(root, key, bad)
    assert ResponseCache(root).get(key, payload(1)) is None
    cache.put(key, payload(1), response(1))  # the re-fetched reply replaces it
    assert ResponseCache(root).get(key, payload(1)) == response(1)


def test_opening_creates_nothing_and_a_disabled_cache_stores_nothing(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = ResponseCache(root)
    assert cache.get("ab" * 32, payload(1)) is None and len(cache) == 0
    assert not root.exists()  # --estimate reads the cache and writes nothing
    off = ResponseCache(None)
    off.put("ab" * 32, payload(1), response(1))
    assert off.get("ab" * 32, payload(1)) is None and off.root is None


def test_entries_are_compressed_and_labelled(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    for i in range(3):
        cache.put(request_key(payload(i)), payload(i), response(i))
    (entry, *_) = cache.entries()
    assert (entry.model, entry.endpoint) == ("m", "http://127.0.0.1:1/v1")
    assert entry.stored < entry.size / 10  # repetitive text: far below a tenth
    assert labels({"endpoint": {"transport": "llama-cpp-in-process", "model_sha256": "f" * 64},
                   "request": {"prompt": "p"}}) == ("sha256:ffffffffffff", "llama-cpp-in-process")


def test_sync_fsyncs_the_wal_and_the_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    cache = ResponseCache(root)
    synced: list[Path] = []
    monkeypatch.setattr(cache_module, "fsync_path", synced.append)
    monkeypatch.setattr(atomic, "fsync_path", synced.append)  # the folder's (fsync_dir)
    cache.sync()
    assert synced == []  # nothing written: nothing to do
    cache.put(request_key(payload(1)), payload(1), response(1))
    cache.sync()
    assert synced == [root / f"{DB_NAME}-wal", root]  # never the database file: see below
    assert cache.take_unsynced() == []
    cache.sync()
    assert len(synced) == 2
    monkeypatch.undo()
    cache.put(request_key(payload(2)), payload(2), response(2))
    cache.sync()  # the real calls
    assert [e.key for e in cache_entries(root)] == sorted(
        request_key(payload(i)) for i in (1, 2))


_OPEN_AND_CLOSE = "import sys\nfrom rimo_eval.chat.cache import ResponseCache\n" \
    "c = ResponseCache(sys.argv[1])\nprint(len(c))\nc.close()"


def test_a_sync_then_another_process_closing_loses_no_later_put(tmp_path: Path) -> None:
    """Issue 30: ``sync`` used to fsync the database file through a descriptor of its own;
    closing it dropped SQLite's locks, so the next process to close the cache deleted the WAL
    under this one, and its later puts went nowhere (a live worker's replies, lost)."""
    root = tmp_path / "cache"
    cache = ResponseCache(root)
    cache.put(request_key(payload(1)), payload(1), response(1))
    cache.sync()
    other = subprocess.run([sys.executable, "-c", _OPEN_AND_CLOSE, str(root)], cwd=REPO_ROOT,
                           env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                           capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "1"
    cache.put(request_key(payload(2)), payload(2), response(2))
    cache.sync()
    seen = subprocess.run([sys.executable, "-c", _OPEN_AND_CLOSE, str(root)], cwd=REPO_ROOT,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                          capture_output=True, text=True, check=True)
    assert seen.stdout.strip() == "2", "a put after another process closed the cache was lost"
    cache.close()
    assert check_whole(root) == {1, 2}


def test_a_readonly_cache_touches_no_file(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    writer_cache = ResponseCache(root)
    writer_cache.put(request_key(payload(1)), payload(1), response(1))
    # While a writer is connected (its WAL is there), a reader sees its commits.
    live = ResponseCache(root, readonly=True)
    assert live.get(request_key(payload(1)), payload(1)) == response(1)
    live.close()
    writer_cache.close()
    before = {p.name: p.stat().st_mtime_ns for p in root.iterdir()}
    assert set(before) == {DB_NAME}  # the last connection folded the WAL in
    reader = ResponseCache(root, readonly=True)
    assert reader.get(request_key(payload(1)), payload(1)) == response(1)
    reader.put(request_key(payload(2)), payload(2), response(2))  # a no-op
    reader.close()
    assert {p.name: p.stat().st_mtime_ns for p in root.iterdir()} == before


def test_a_folder_that_cannot_be_fsynced_is_no_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some file systems refuse a folder's fsync (EINVAL); atomic writes allow it, and so does
    the cache now (every run on such a cache_dir used to end in a traceback)."""
    root = tmp_path / "cache"
    real = cache_module.fsync_path

    def no_folder_fsync(path: Path) -> None:
        if Path(path).is_dir():
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), str(path))
        real(path)

    monkeypatch.setattr(cache_module, "fsync_path", no_folder_fsync)
    monkeypatch.setattr(atomic, "fsync_path", no_folder_fsync)
    cache = ResponseCache(root)
    cache.put(request_key(payload(1)), payload(1), response(1))
    cache.sync()
    assert cache.take_unsynced() == []


def test_a_database_error_that_is_no_damage_is_a_clear_error(tmp_path: Path) -> None:
    """A lock held past the busy timeout (or a full disk) stops a put with a ``StageError``
    naming the file; it used to escape as ``sqlite3.OperationalError``, a traceback."""
    root = tmp_path / "cache"
    cache = ResponseCache(root)
    cache.put(request_key(payload(1)), payload(1), response(1))
    conn = cache.connection()
    assert conn is not None
    conn.execute("PRAGMA busy_timeout = 50")  # (120 s in use)
    other = sqlite3.connect(root / DB_NAME, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StageError, match=r"responses\.sqlite3: the response cache "
                           r"failed: database is locked"):
            cache.put(request_key(payload(2)), payload(2), response(2))
    finally:
        other.execute("ROLLBACK")
        other.close()
    cache.close()
