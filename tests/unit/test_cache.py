"""The response cache removes a killed writer's temporary file, never a live writer's; its
batched durability is one ``syncfs`` on Linux, an fsync per entry and folder elsewhere."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stages.chat import cache as cache_module
from stages.chat.cache import STALE_AFTER_S, ResponseCache, request_key
from tests.conftest import REPO_ROOT

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "2+2?"}]}
KEY = request_key(REQUEST)

# A writer that stops for good just before its rename, as a kill -9 would find it.
_WRITER = textwrap.dedent("""
    import os, sys, time
    from stages.chat.cache import ResponseCache
    os.replace = lambda *a: (print("ready", flush=True), time.sleep(600))
    ResponseCache(sys.argv[1]).put(sys.argv[2], {"model": "m"}, {"text": "4"})
""")


def temp_files(root: Path) -> list[Path]:
    return sorted(root.glob("*/.*.tmp"))


def test_a_killed_writers_temp_file_is_removed_on_the_next_start(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(root), KEY],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    (orphan,) = temp_files(root)
    assert str(proc.pid) in orphan.name
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    cache = ResponseCache(root)
    assert temp_files(root) == []
    assert cache.get(KEY, REQUEST) is None  # the killed write left no entry either
    cache.put(KEY, REQUEST, {"text": "4"})
    assert ResponseCache(root).get(KEY, REQUEST) == {"text": "4"}


def test_a_live_writers_temp_file_is_kept_and_an_old_one_removed(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    shard = root / KEY[:2]
    shard.mkdir(parents=True)
    live = shard / f".{KEY[:16]}.{os.getpid()}.abc123.tmp"  # this process: alive, young
    live.write_bytes(b"{")
    old = shard / f".{KEY[:16]}.{os.getpid()}.def456.tmp"  # alive, but older than the limit
    old.write_bytes(b"{")
    stamp = time.time() - STALE_AFTER_S - 60
    os.utime(old, (stamp, stamp))
    unnamed = shard / ".legacy-name.tmp"  # no pid in the name: only age can condemn it
    unnamed.write_bytes(b"{")
    entry = root / "ab" / f"{'ab' * 32}.json"
    entry.parent.mkdir()
    entry.write_text("{}")
    ResponseCache(root)
    assert temp_files(root) == sorted([live, unnamed])
    assert entry.exists()
    ResponseCache(None)  # a disabled cache touches nothing
    assert live.exists()


def test_sync_is_one_syncfs_where_there_is_one_else_an_fsync_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    cache = ResponseCache(root)
    keys = [f"{i:02x}" * 32 for i in (1, 2, 3)]

    def put_all() -> None:
        for k in keys:
            cache.put(k, {"q": k}, {"texts": [k]})

    if sys.platform.startswith("linux"):
        assert cache_module._SYNCFS is not None  # the real call, on this machine
        put_all()
        cache.sync()
        assert cache.take_unsynced() == []
    synced: list[str] = []

    def fake_syncfs(fd: int) -> int:
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.isdir("/proc") else "?")
        return 0

    monkeypatch.setattr(cache_module, "_SYNCFS", fake_syncfs)
    put_all()
    cache.sync()
    assert len(synced) == 1 and synced[0] in (str(root), "?")
    cache.sync()  # nothing new: no call at all
    assert len(synced) == 1

    fsynced: list[Path] = []
    monkeypatch.setattr(cache_module, "_SYNCFS", None)
    monkeypatch.setattr(cache_module, "fsync_path", fsynced.append)
    put_all()
    cache.sync()
    entries = {cache.path(k) for k in keys}
    assert sorted(fsynced) == sorted(entries | {p.parent for p in entries} | {root})
    assert [cache.get(k, {"q": k}) for k in keys] == [{"texts": [k]} for k in keys]
