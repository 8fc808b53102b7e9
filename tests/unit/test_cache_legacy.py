"""A per-file cache of an older version (format 1) keeps working: its entries are served with
the old checks, a clear message says so, and ``rimo-eval cache migrate`` moves them into the
database once (a killed writer's temporary file removed, a live one's kept)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from stages.chat import cache_legacy
from stages.chat.cache import ResponseCache, request_key
from stages.cli import main
from tests.unit.test_cache import payload, response


def write_legacy(root: Path, i: int, **override: object) -> Path:
    """An entry exactly as the per-file cache wrote it."""
    key = request_key(payload(i))
    path = root / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"format": 1, "key": key, "request": payload(i), "response": response(i), **override}
    path.write_text(json.dumps(entry, sort_keys=True, separators=(",", ":")))
    return path


def test_old_entries_are_served_and_migrated_once(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "cache"
    files = [write_legacy(root, i) for i in range(5)]
    wrong = write_legacy(root, 5, request=payload(99))  # stored under another request's key
    torn = write_legacy(root, 6)
    torn.write_text(torn.read_text()[:30])
    dead = files[0].parent / f".{files[0].stem[:16]}.999999999.abc.tmp"  # a killed writer's
    dead.write_text("{")
    live = files[1].parent / f".{files[1].stem[:16]}.{os.getpid()}.def.tmp"  # alive, young
    live.write_text("{")

    cache = ResponseCache(root)
    assert "per-file entries of an older rimo-eval" in capsys.readouterr().err
    assert all(cache.get(request_key(payload(i)), payload(i)) == response(i) for i in range(5))
    assert cache.get(request_key(payload(5)), payload(5)) is None
    assert cache.get(request_key(payload(6)), payload(6)) is None
    cache.put(request_key(payload(2)), payload(2), {"texts": ["newer"]})  # already in the db
    cache.close()

    assert main(["cache", "migrate", "--dir", str(root), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert counts == {"moved": 4, "already": 1, "dropped": 2, "temporary": 1}
    assert not any(p.exists() for p in [*files, wrong, torn, dead])
    assert live.exists()  # a live writer's file is left alone (and so is its folder)
    after = ResponseCache(root)
    assert [after.get(request_key(payload(i)), payload(i)) for i in range(5)] == [
        response(0), response(1), {"texts": ["newer"]}, response(3), response(4)]
    live.unlink()
    assert main(["cache", "migrate", "--dir", str(root), "--json"]) == 0  # nothing left
    assert json.loads(capsys.readouterr().out)["moved"] == 0
    assert not cache_legacy.present(root)
    assert ResponseCache(root).legacy is False


def test_an_old_temporary_file_of_a_live_pid_is_stale(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    old = write_legacy(root, 1).parent / f".x.{os.getpid()}.y.tmp"
    old.write_text("{")
    stamp = time.time() - cache_legacy.STALE_AFTER_S - 60
    os.utime(old, (stamp, stamp))
    assert cache_legacy.clean_stale(root) == [old]


def test_presence_looks_at_shard_names_only(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    assert not cache_legacy.present(root)  # absent
    (root / "not-a-shard").mkdir(parents=True)
    (root / "zz").mkdir()
    assert not cache_legacy.present(root)
    (root / "0f").mkdir()
    assert cache_legacy.present(root)
