"""Atomic artifact writes: a temporary file in the target folder, fsync, then rename.

A crash at any point leaves either the previous artifact or the new one, never a torn file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


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
        os.replace(tmp_path, target)
        _fsync_dir(target.parent)
    finally:
        tmp_path.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_text(target: str | os.PathLike[str], text: str) -> None:
    write_bytes(target, text.encode("utf-8"))


def dumps_json(obj: Any) -> str:
    """Stable JSON: sorted keys, fixed indent, trailing newline (diff- and hash-friendly)."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(target: str | os.PathLike[str], obj: Any) -> None:
    write_text(target, dumps_json(obj))


def write_with(target: str | os.PathLike[str], writer: Callable[[Path], None]) -> None:
    """Let ``writer`` produce the file at a temporary path, then publish it atomically."""
    with atomic_path(target) as tmp:
        writer(tmp)
