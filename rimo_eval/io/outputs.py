"""Output paths a user names (``view --out``, ``leaderboard --out``, ``compare --html``,
``predict --export-batch``): written so that nothing rimo-eval did not write is ever lost.

**A folder** is built in a fresh folder beside the target and swapped in by rename. It holds
``MARKER``, a small file naming the tool that wrote it; an existing folder is replaced only
when it is empty or holds that tool's marker (so a file put into a marked folder goes with it,
as the marker says). Everything else is refused before any work, with one line naming the path
and what to do: a folder without the marker that holds anything, another tool's folder, a file
or a device where a folder is wanted, a symbolic link (never written through: what it points
to is the user's), the current folder or one that holds it, a repository's root. ``rmtree``
only ever runs on a folder that holds the marker. A swap killed between its two renames leaves
the previous folder at ``.NAME.old``; the next write of NAME puts it back first.

**A file** is written atomically (io/atomic.py) and replaces only an empty file or one the
tool recognises as its own by its head (``ours``: compare's page carries ``generator``'s meta
tag, an exported batch is known by its request line); never a folder, a link or a device.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from rimo_eval.errors import ConfigError
from rimo_eval.io.atomic import atomic_path, fsync_dir
from rimo_eval.io.input_files import kind

MARKER = ".rimo-eval-output"
HEAD_BYTES = 1 << 16  # how much of an existing file ``ours`` may read to know it
Recognise = Callable[[BinaryIO], bool]  # an open existing file -> whether the tool wrote it


def marker_text(tool: str) -> str:
    return (f"rimo-eval {tool}\n"
            f"rimo-eval {tool} wrote this folder and replaces it whole when it writes here "
            "again: keep no file of your own in it.\n")


def generator(tool: str) -> str:
    """The HTML meta tag that marks a page as the tool's (``html_ours``)."""
    return f'<meta name="generator" content="rimo-eval {tool}">'


def html_ours(tool: str) -> Recognise:
    mark = generator(tool).encode()
    return lambda fh: mark in fh.read(HEAD_BYTES)


def owner(folder: Path) -> str | None:
    """The tool named by ``folder``'s marker (a real folder, not a link, holding MARKER), or
    None. The marker may be a link to a regular file: DVC's ``cache.type: symlink`` checks
    reports/view out so."""
    marker = folder / MARKER
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode) or \
                not stat.S_ISREG(os.stat(marker).st_mode):
            return None
        with open(marker, "rb") as fh:
            first = fh.read(200).split(b"\n", 1)[0].decode("utf-8", "replace")
    except OSError:
        return None
    return first.removeprefix("rimo-eval ") if first.startswith("rimo-eval ") else None


def _refuse(where: str, path: str | os.PathLike[str], problem: str, advice: str) -> ConfigError:
    return ConfigError(f"{where} {os.fspath(path)}: {problem}: {advice}")


def _target(path: str | os.PathLike[str]) -> Path:
    """Absolute, its folder's links resolved but never its own last name: a link there is
    refused, not followed."""
    absolute = Path(os.path.abspath(path))
    return absolute.parent.resolve() / absolute.name if absolute.name else absolute


def _parent_ok(target: Path, where: str, path: str | os.PathLike[str]) -> None:
    """The nearest existing folder above ``target`` must be a folder (mkdir would fail)."""
    for above in target.parents:
        if os.path.lexists(above):
            if not above.is_dir():
                raise _refuse(where, path, f"cannot be made: {above} is not a folder",
                              "name a path under a folder")
            return


def _existing(target: Path, where: str, path: str | os.PathLike[str], what: str) -> int | None:
    """The mode of what is at ``target``, None when nothing is (its parent checked), or the
    refusal of a symbolic link: rimo-eval never writes through one or replaces one, so what
    it points to is kept."""
    try:
        mode = os.lstat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there (or a file above)
        _parent_ok(target, where, path)
        return None
    if stat.S_ISLNK(mode):
        raise _refuse(where, path, "is a symbolic link (rimo-eval never writes through one, "
                      "so what it points to is kept)", f"name a new {what}, or the real one")
    return mode


def _backup(target: Path) -> Path:
    return target.with_name(f".{target.name}.old")


def claim_folder(path: str | os.PathLike[str], tool: str, where: str) -> Path:
    """The folder ``tool`` may write at ``path`` (absolute), or ConfigError saying why not.
    Tools call it before their work, so a refusal costs nothing; ``output_folder`` again."""
    target = _target(path)
    here = Path.cwd().resolve()
    if target == here or target in here.parents:
        raise _refuse(where, path, "is the current folder or holds it",
                      "name a new folder for the output (rimo-eval replaces its output "
                      "folder whole)")
    backup = _backup(target)
    if not os.path.lexists(target) and owner(backup) == tool:
        os.rename(backup, target)  # a swap killed between its renames: the previous output
    mode = _existing(target, where, path, "folder")
    if mode is None:
        return target
    if not stat.S_ISDIR(mode):
        raise _refuse(where, path, f"is {kind(mode)}, not a folder",
                      "name a new folder (nothing was written)")
    if (target / ".git").exists() or (target / ".dvc").is_dir():
        raise _refuse(where, path, "is a repository's root",
                      "name a new folder for the output")
    found = owner(target)
    if found is None and any(os.scandir(target)):
        raise _refuse(where, path, f"holds files rimo-eval did not write (no {MARKER} in "
                      "it)", "name a new or empty folder (rimo-eval replaces only a folder it "
                      "made; an old rimo-eval output folder without the marker: remove it "
                      "yourself)")
    if found is not None and found != tool:
        raise _refuse(where, path, f"holds the output of rimo-eval {found}, not of {tool}",
                      "name another folder")
    if os.path.lexists(backup) and owner(backup) != tool:
        raise _refuse(where, path, f"{backup} is in the way (rimo-eval moves the old output "
                      "there while it swaps in the new one)", "move it away")
    return target


@contextlib.contextmanager
def output_folder(path: str | os.PathLike[str], tool: str, where: str) -> Iterator[Path]:
    """Yield a fresh folder beside ``path`` (marked as ``tool``'s) to write the output in;
    on success it replaces ``path`` whole, else it is removed and ``path`` is as it was."""
    target = claim_folder(path, tool, where)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(where, path, f"cannot be made ({exc.strerror})",
                      "name a folder you can write") from None
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        # First, so a killed run's folder is known as the tool's and can be removed later.
        (tmp / MARKER).write_text(marker_text(tool), encoding="utf-8")
        yield tmp
        tmp.chmod(0o755)  # not mkdtemp's 0700: readable by a static host, as before
        claim_folder(path, tool, where)  # what is there now, after the build
        _swap(tmp, target, tool, where)
    except BaseException:
        _remove_own(tmp, tool)
        raise
    # Build folders of killed runs of this output (mkdtemp's 8 random characters).
    for stale in target.parent.glob(f".{glob.escape(target.name)}.{'?' * 8}.tmp"):
        _remove_own(stale, tool)


def _swap(tmp: Path, target: Path, tool: str, where: str) -> None:
    try:
        os.rename(tmp, target)  # no folder there, or an empty one
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        if owner(target) != tool:  # changed since claim_folder: leave it be
            raise _refuse(where, target, "changed while the output was made",
                          "run again") from None
        backup = _backup(target)
        _remove_own(backup, tool)
        os.rename(target, backup)
        os.rename(tmp, target)
        _remove_own(backup, tool)
    fsync_dir(target.parent)


def _remove_own(folder: Path, tool: str) -> None:
    """rmtree ``folder`` only if it is a real folder marked as ``tool``'s."""
    if owner(folder) == tool:
        shutil.rmtree(folder, ignore_errors=True)


def claim_file(path: str | os.PathLike[str], tool: str, where: str, ours: Recognise) -> Path:
    """The file ``tool`` may write at ``path`` (absolute), or ConfigError saying why not."""
    raw = os.fspath(path)
    if raw.endswith((os.sep, f"{os.sep}.", f"{os.sep}..")) or Path(raw).name in ("", ".."):
        raise _refuse(where, path, "names a folder, not a file", "name a file")
    target = _target(raw)
    mode = _existing(target, where, path, "file")
    if mode is None:
        return target
    if stat.S_ISDIR(mode):
        raise _refuse(where, path, "is a folder, not a file", "name a file")
    if not stat.S_ISREG(mode):
        raise _refuse(where, path, f"is {kind(mode)}, not a regular file", "name a file")
    with open(target, "rb") as fh:
        if os.fstat(fh.fileno()).st_size and not ours(fh):
            raise _refuse(where, path, f"is a file rimo-eval {tool} did not write",
                          "name a new file, or remove this one yourself")
    return target


@contextlib.contextmanager
def output_file(path: str | os.PathLike[str], tool: str, where: str,
                ours: Recognise) -> Iterator[Path]:
    """Yield a temporary path to write the file at; on success it replaces ``path``
    atomically (``claim_file`` says what may be replaced)."""
    target = claim_file(path, tool, where, ours)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(where, path, f"cannot be made ({exc.strerror})",
                      "name a file in a folder you can write") from None
    with atomic_path(target) as tmp:
        yield tmp
        claim_file(path, tool, where, ours)  # what is there now, just before the rename


__all__ = ["HEAD_BYTES", "MARKER", "Recognise", "claim_file", "claim_folder", "generator",
           "html_ours", "marker_text", "output_file", "output_folder", "owner"]
