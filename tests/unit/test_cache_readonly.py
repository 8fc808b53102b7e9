"""A read-only response cache (issue 42 §5): named as read-only with what to do, never as
damage; ``stats`` and ``verify`` work read-only, ``--recover``, ``prune`` and a run that would
store replies refuse with that message; no traceback, no file made or changed.

Each command runs through the real CLI inside a private mount namespace where the cache folder
is a read-only bind mount (``tests/support/read_only.py``): root ignores file modes, a
read-only mount stops it. The last test makes one file immutable (``chattr +i``), which stops
root too, for a cache whose folder stays writable."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rimo_eval.chat.cache import DB_NAME, ResponseCache, request_key
from rimo_eval.errors import StageError
from tests.support.cache_tools import payload, response, set_data
from tests.support.read_only import run_read_only, snapshot

ADVICE = "make the folder and its files writable, or point cache_dir"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    cache = ResponseCache(folder)
    for i in range(5):
        cache.put(request_key(payload(i)), payload(i), response(i))
    cache.close()
    return folder


def cache_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_read_only(root, "-m", "rimo_eval", "cache", *args, "--dir", str(root))


def read_only_said(done: subprocess.CompletedProcess[str], root: Path) -> None:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert (f"{root / DB_NAME}: the response cache is read-only (its file system is mounted "
            f"read-only)") in done.stderr
    assert ADVICE in done.stderr and f"cp -a {root} NEW" in done.stderr
    assert "verify --recover --dir" not in done.stderr  # no repair is offered for it
    assert "damaged" not in done.stderr and "not a readable" not in done.stderr


def test_stats_and_verify_read_a_read_only_cache(root: Path) -> None:
    before = snapshot(root)
    done = cache_cli(root, "stats", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["entries"] == 5
    done = cache_cli(root, "verify")
    assert done.returncode == 0, done.stderr
    assert "5 entries checked, 0 bad, database check: ok" in done.stdout
    assert "checked read-only (its file system is mounted read-only): nothing was written" \
        in done.stdout
    assert snapshot(root) == before


def test_verify_names_bad_entries_and_refuses_to_delete_them(root: Path) -> None:
    bad = request_key(payload(2))
    set_data(root, bad, b"\x28\xb5\x2f\xfd garbage")
    before = snapshot(root)
    done = cache_cli(root, "verify", "--json")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert [b["key"] for b in json.loads(done.stdout)["bad"]] == [bad]
    done = cache_cli(root, "verify", "--delete-bad")
    read_only_said(done, root)
    assert "so its 1 bad entries cannot be deleted" in done.stderr
    assert snapshot(root) == before


def test_recover_and_prune_refuse_and_leave_nothing(root: Path) -> None:
    before = snapshot(root)
    done = cache_cli(root, "verify", "--recover")
    read_only_said(done, root)
    assert "so it cannot be rebuilt in place" in done.stderr
    done = cache_cli(root, "prune", "--older-than", "1s")
    read_only_said(done, root)
    assert snapshot(root) == before  # no .recovering file, no WAL, no -shm, no damage note


def test_a_run_is_told_before_it_sends_anything(root: Path) -> None:
    """Lookups of a run open the cache to write: said at once, before a reply is paid for;
    an estimate (``readonly``) reads it."""
    script = (
        "import json, sys\n"
        "from rimo_eval.chat.cache import ResponseCache\n"
        "from rimo_eval.errors import StageError\n"
        f"key, request = {request_key(payload(1))!r}, {payload(1)!r}\n"
        "print(json.dumps(ResponseCache(sys.argv[1], readonly=True).get(key, request)))\n"
        "try:\n"
        "    ResponseCache(sys.argv[1]).get(key, request)\n"
        "except StageError as exc:\n"
        "    print(type(exc).__name__, exc, file=sys.stderr)\n"
        "    sys.exit(1)\n")
    done = run_read_only(root, "-c", script, str(root))
    assert json.loads(done.stdout) == response(1)
    read_only_said(done, root)
    assert done.stderr.startswith("ReadOnlyCache ")


def test_a_wal_left_on_a_read_only_mount_is_named(root: Path, tmp_path: Path) -> None:
    """A cache copied while a writer had it open (its WAL holds the last replies, no -shm):
    read-only, SQLite cannot index that WAL; the file is read as it is and verify says what
    it did not read."""
    writer = ResponseCache(root)
    writer.put(request_key(payload(7)), payload(7), response(7))
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in (DB_NAME, f"{DB_NAME}-wal"):
        shutil.copyfile(root / name, copy / name)
    writer.close()
    done = cache_cli(copy, "verify")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "5 entries checked" in done.stdout
    assert f"{DB_NAME}-wal (" in done.stdout and "the replies committed there are not seen" \
        in done.stdout


@pytest.fixture
def immutable(root: Path) -> Iterator[Path]:
    db = root / DB_NAME
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not possible here (not root, or the file system lacks it)")
    try:
        yield db
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


def test_an_immutable_file_in_a_writable_folder(root: Path, immutable: Path) -> None:
    """SQLite opens a file it may not write read-only without a word; the first put would
    fail after its request was paid for. The open says it instead."""
    with pytest.raises(StageError, match=rf"read-only \({DB_NAME} is not writable\); "
                       "make the folder"):
        ResponseCache(root).get(request_key(payload(1)), payload(1))
    with pytest.raises(sqlite3.OperationalError):  # (what the file is: really not writable)
        sqlite3.connect(immutable).execute("DELETE FROM entries")
