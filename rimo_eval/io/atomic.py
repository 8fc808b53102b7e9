"""Atomic artifact writes: a temporary file in the target folder, fsync, then rename.

A crash at any point leaves either the previous artifact or the new one, never a torn file;
the temporary file a killed run leaves behind is removed by the next write of that target.

Test hook: with ``RIMO_EVAL_TEST_PAUSE_BEFORE_REPLACE=<seconds>[@<n>]`` in the environment, each
write prints ``rimo-eval test hook: before replace <target>`` on stderr and sleeps that long just
before the rename (only before the n-th one, with ``@<n>``), so a test can kill a stage at a
known point (tests/e2e/test_atomicity.py). Unset, it costs one environment lookup.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PAUSE_ENV = "RIMO_EVAL_TEST_PAUSE_BEFORE_REPLACE"
_publishes: list[Path] = []  # this process's publishes so far, for the test hook


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it onto ``target`` on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        # mkstemp creates 0600; artifacts get the usual mode for new files.
        os.chmod(tmp_path, 0o666 & ~_umask())
        _test_pause(target)
        os.replace(tmp_path, target)
        fsync_dir(target.parent)
        # Temporary files of this target left by a killed run (the finally below never ran).
        for stale in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
            stale.unlink(missing_ok=True)
    finally:
        tmp_path.unlink(missing_ok=True)


def _test_pause(target: Path) -> None:
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return
    _publishes.append(target)
    seconds, _, nth = spec.partition("@")
    print(f"rimo-eval test hook: before replace {target}", file=sys.stderr, flush=True)
    if not nth or int(nth) == len(_publishes):
        time.sleep(float(seconds))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file or a folder by path (a folder's fsync makes the names in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a folder where the file system can (else nothing: its names are as durable as
    that file system makes them)."""
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a folder
        fsync_path(path)


def write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_text(target: str | os.PathLike[str], text: str) -> None:
    write_bytes(target, text.encode("utf-8"))


def dumps_json(obj: Any, *, sort_keys: bool = True) -> str:
    """Stable JSON: sorted keys, fixed indent, trailing newline (diff- and hash-friendly).
    ``sort_keys=False`` keeps a deterministic insertion order that readers see (metrics.json
    puts its headline first, and ``dvc exp show`` shows columns in file order)."""
    return json.dumps(obj, indent=2, sort_keys=sort_keys, ensure_ascii=False,
                      allow_nan=False) + "\n"


def write_json(target: str | os.PathLike[str], obj: Any, *, sort_keys: bool = True) -> None:
    write_text(target, dumps_json(obj, sort_keys=sort_keys))


def write_with(target: str | os.PathLike[str], writer: Callable[[Path], None]) -> None:
    """Let ``writer`` produce the file at a temporary path, then publish it atomically."""
    with atomic_path(target) as tmp:
        writer(tmp)
