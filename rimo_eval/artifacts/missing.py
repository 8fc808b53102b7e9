"""Which DVC-tracked outputs a command needs but this clone does not have.

A fresh ``git clone`` carries dvc.lock and the git-tracked reports, not the cached outputs. The
run reader (rimo_eval.run.reader) asks this first, so a missing file is named with what brings
it back (rimo_eval.run.recovery) instead of surfacing later as an unreadable table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rimo_eval.errors import StageError


def _posix(path: str | os.PathLike[str]) -> str:
    return Path(path).as_posix()


def absent_outputs(repo: Any, root: Path, workspace: bool,
                   only: Iterable[str | os.PathLike[str]] | None = None
                   ) -> list[tuple[str, bool]]:
    """(path, in the local cache) of each cached output of ``repo``'s index (a
    ``dvc.repo.Repo``, at the workspace or at a revision) that is absent: from the work tree
    at ``root`` (``workspace``), else from the local DVC cache (a directory counts as absent if
    any file of it is). Outputs with ``cache: false`` live in git and are never listed."""
    wanted = None if only is None else {_posix(p) for p in only}
    odb = repo.cache.local
    absent: list[tuple[str, bool]] = []
    for out in repo.index.outs:
        # def_path is relative to its .dvc file's folder; report repo-relative paths
        path = _posix(repo.fs.relpath(out.fs_path, repo.root_dir))
        if not out.use_cache or (wanted is not None and path not in wanted):
            continue
        cached = in_cache(odb, out.hash_info.value if out.hash_info else None)
        if (not (root / path).exists()) if workspace else not cached:
            absent.append((path, cached))
    return sorted(absent)


def missing_outputs(root: Path, rev: str | None = None,
                    only: Iterable[str | os.PathLike[str]] | None = None) -> list[str]:
    """The absent outputs (``absent_outputs``) of the workspace (``rev=None``) or a commit."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(os.fspath(root), rev=rev) as repo:
            return [p for p, _ in absent_outputs(repo, root, rev is None, only)]
    except DvcException as exc:
        raise StageError(f"dvc.lock at {rev or 'the workspace'}: not readable by DVC: "
                         f"{exc}") from exc


def in_cache(odb: Any, oid: str | None) -> bool:
    """Whether the local cache holds object ``oid`` (a directory: every file it lists)."""
    if not oid:
        return False
    if not odb.exists(oid):
        return False
    if not oid.endswith(".dir"):
        return True
    try:  # a directory's manifest: every file it lists must be there too
        entries = json.loads(Path(odb.oid_to_path(oid)).read_text())
    except (OSError, ValueError):
        return False
    return all(isinstance(e, dict) and odb.exists(e.get("md5", ""))
               for e in entries)


__all__ = ["absent_outputs", "in_cache", "missing_outputs"]
