"""Which DVC-tracked outputs a command needs but this clone does not have yet.

A fresh ``git clone`` carries dvc.lock and the git-tracked reports, not the cached outputs:
those come from the DVC remote with ``dvc pull`` (``dvc exp pull`` for an experiment). audit
and compare call this first, so a missing file is named with the command that brings it
instead of surfacing later as an unreadable table.
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


def missing_outputs(root: Path, rev: str | None = None,
                    only: Iterable[str | os.PathLike[str]] | None = None) -> list[str]:
    """Cached outputs of dvc.lock absent from the workspace (``rev=None``) or, for a commit,
    absent from the local DVC cache (a directory counts as absent if any file of it is).

    ``only`` restricts the check to these paths (relative to the repo root). Outputs with
    ``cache: false`` live in git and are never listed.
    """
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    wanted = None if only is None else {_posix(p) for p in only}
    missing: list[str] = []
    try:
        with Repo(os.fspath(root), rev=rev) as repo:
            odb = repo.cache.local
            for out in repo.index.outs:
                # def_path is relative to its .dvc file's folder; report repo-relative paths
                path = _posix(repo.fs.relpath(out.fs_path, repo.root_dir))
                if not out.use_cache or (wanted is not None and path not in wanted):
                    continue
                if rev is None:
                    if not (root / path).exists():
                        missing.append(path)
                elif not _in_cache(odb, out.hash_info.value if out.hash_info else None):
                    missing.append(path)
    except DvcException as exc:
        raise StageError(f"dvc.lock at {rev or 'the workspace'}: not readable by DVC: "
                         f"{exc}") from exc
    return sorted(missing)


def _in_cache(odb: Any, oid: str | None) -> bool:
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


def require_outputs(root: Path, rev: str | None = None, label: str | None = None,
                    experiment: bool = False,
                    only: Iterable[str | os.PathLike[str]] | None = None) -> None:
    """Raise a StageError naming every missing output and the DVC command that brings it."""
    absent = missing_outputs(root, rev, only)
    if not absent:
        return
    listed = ", ".join(absent)
    if rev is None:
        raise StageError(f"{len(absent)} DVC-tracked output(s) missing from the "
                         f"workspace: {listed}. `dvc pull` brings them from the DVC remote "
                         f"(`dvc checkout` if this clone's cache already has them).")
    name = label or rev
    fix = (f"`dvc exp pull <git-remote> {name}` brings them (the experiment's `dvc pull`)"
           if experiment else
           f"`dvc pull` brings them when {name} is checked out, `dvc fetch --rev {rev}` "
           f"without checking it out")
    raise StageError(f"{len(absent)} DVC-tracked output(s) of {name} "
                     f"({rev[:12]}) missing from the local DVC cache: {listed}. {fix}.")
