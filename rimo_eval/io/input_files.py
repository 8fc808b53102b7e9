"""Input paths named in params.yaml (``predict.replay.path``, ``validate.errata``,
``predict.local.model_path``): a regular file, or for the replay a folder of them.

A FIFO, a device (``/dev/zero``) or a socket passed every type check, then ``dvc exp run`` hung
hashing it as a stage dependency (or a stage hung reading it), and a folder where a file is
read ended in an IsADirectoryError traceback. The typed params call ``input_problem`` in a
validator, so ``check-params`` (and every command that reads the file) refuses them at once
with the key path. A path that does not exist is left to the stage, which names it; only
``stat`` is called, which never blocks on a FIFO.
"""

from __future__ import annotations

import os
import stat

# What a folder input may hold that its reader reads; anything else in it is only hashed by
# DVC, which still hangs on a FIFO or a device.
READ_SUFFIXES = (".jsonl", ".csv")


def kind(mode: int) -> str:
    """What a ``stat`` mode names, for messages: "a FIFO", "a character device"."""
    kinds = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _stat(path: str) -> os.stat_result | None:
    """``stat`` through links; None when nothing is there. A link to nothing is an error."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise ValueError(f"{path} is a broken symbolic link (to {os.readlink(path)})") \
                from None
        return None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror})") from None


def input_problem(path: str, folder: bool = False) -> str | None:
    """What is wrong with ``path`` as an input file (``folder``: or a folder of input files),
    or None. Missing is not a problem here (the stage says so)."""
    try:
        found = _stat(path)
    except ValueError as exc:
        return str(exc)
    if found is None or stat.S_ISREG(found.st_mode):
        return None
    if stat.S_ISDIR(found.st_mode):
        if not folder:
            return f"{path} is a folder, not a regular file: name the file itself"
        if path.rstrip("/").endswith(READ_SUFFIXES):  # meant as a file, not a folder of them
            return (f"{path} is a folder, not a regular file (a folder given here is read for "
                    f"the *{' and *'.join(READ_SUFFIXES)} files in it: name a file, or a "
                    "folder without such a suffix)")
        return _folder_problem(path)
    return _not_regular(path, found)


def _not_regular(path: str, found: os.stat_result) -> str:
    link = f"a symbolic link to {kind(found.st_mode)}" if os.path.islink(path) else ""
    return f"{path} is not a regular file ({link or kind(found.st_mode)})"


def _folder_problem(top: str) -> str | None:
    """The first entry of a folder input that is neither a regular file nor a folder
    (through links; links to folders are not walked, so a loop cannot hang it), or a folder
    where its reader takes a file (a sub-folder ``x.jsonl``)."""
    for here, dirs, files in os.walk(top, onerror=None, followlinks=False):
        for name in sorted(dirs + files):
            path = os.path.join(here, name)
            try:
                found = _stat(path)
            except ValueError as exc:
                return str(exc)
            if found is None or stat.S_ISREG(found.st_mode):
                continue
            if stat.S_ISDIR(found.st_mode):
                if here == top and name.endswith(READ_SUFFIXES):
                    return (f"{path} is a folder, not a regular file (the "
                            f"*{' and *'.join(READ_SUFFIXES)} files in {top} are read)")
                continue
            return _not_regular(path, found)
    return None


def check_input(value: str | None, folder: bool = False) -> None:
    """For a pydantic validator: ValueError saying what is wrong with ``value`` (the params
    loader prefixes the file and key path)."""
    problem = input_problem(value, folder) if value else None
    if problem:
        raise ValueError(problem)


__all__ = ["READ_SUFFIXES", "check_input", "input_problem", "kind"]
