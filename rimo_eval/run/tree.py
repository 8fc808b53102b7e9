"""A revision's files without building DVC's index of it: git's tree at the commit for tracked
files, and for DVC's outputs the hashes its dvc.lock records, read from the local DVC cache.

DVC's own index of a revision (dvc.yaml and dvc.lock turned into stage and output objects, the
tree walked for .dvc files) costs about half a second per revision, which made
``leaderboard --all`` over 50 experiments mostly index building. A run needs only the lock's
``outs`` (path -> md5) and the cache's layout, so the reader builds DVC's index once, for the
workspace, and reads every other revision through this (benchmarks/README.md, issue 41).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from rimo_eval.artifacts.missing import in_cache
from rimo_eval.artifacts.paths import LOCK_PATH


class LockTree:
    """The files of commit ``rev``: ``git`` (scmrepo's file system at the commit) and the
    outputs its dvc.lock records, found in ``odb`` (the local DVC cache)."""

    def __init__(self, git: Any, odb: Any) -> None:
        self.git = git
        self.odb = odb
        self.outs = self._outs()

    def _outs(self) -> dict[str, str]:
        """Each output path of the lock -> its md5 (``.dir`` for a folder)."""
        import yaml

        if not self.git.exists(LOCK_PATH.as_posix()):
            return {}
        try:
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            lock = yaml.load(self.git.cat_file(LOCK_PATH.as_posix()), Loader=loader) or {}
        except yaml.YAMLError:
            return {}
        outs: dict[str, str] = {}
        for stage in (lock.get("stages") or {}).values():
            for out in (stage or {}).get("outs") or []:
                if isinstance(out, dict) and out.get("path") and out.get("md5"):
                    outs[PurePosixPath(out["path"]).as_posix()] = str(out["md5"])
        return outs

    def _dvc_file(self, path: str) -> None:
        """Outputs added with ``dvc add`` are in ``<path>.dvc`` files, not in the lock: the one
        of ``path`` or of a folder above it joins ``outs`` when asked (no tree walk)."""
        import yaml

        parts = PurePosixPath(path).parts
        for n in range(len(parts), 0, -1):
            candidate = PurePosixPath(*parts[:n])
            dvc_file = f"{candidate}.dvc"
            if not self.git.isfile(dvc_file):
                continue
            try:
                meta = yaml.safe_load(self.git.cat_file(dvc_file)) or {}
            except yaml.YAMLError:
                return
            for out in meta.get("outs") or []:
                if isinstance(out, dict) and out.get("path") and out.get("md5"):
                    where = (candidate.parent / str(out["path"])).as_posix()
                    self.outs.setdefault(where, str(out["md5"]))
            return

    def _object(self, path: str) -> str | None:
        """The cache object of ``path``: its own md5, or its entry in a folder's manifest."""
        if path not in self.outs:
            self._dvc_file(path)
        if path in self.outs:
            return self.outs[path]
        for folder, oid in self.outs.items():
            if oid.endswith(".dir") and path.startswith(f"{folder}/"):
                rel = path[len(folder) + 1:]
                try:
                    entries = json.loads(Path(self.odb.oid_to_path(oid)).read_text())
                except (OSError, ValueError):
                    return None
                return next((str(e.get("md5")) for e in entries
                             if isinstance(e, dict) and e.get("relpath") == rel), None)
        return None

    def in_git(self, path: str) -> bool:
        return bool(self.git.isfile(path))

    def cached(self, path: str) -> bool | None:
        """Whether the output ``path`` is in the local cache; None when it is no output."""
        if path not in self.outs:
            self._dvc_file(path)
        oid = self.outs.get(path)
        return None if oid is None else in_cache(self.odb, oid)

    def exists(self, path: str) -> bool:
        if self.in_git(path):
            return True
        oid = self._object(path)
        return oid is not None and Path(self.odb.oid_to_path(oid)).is_file()

    def local(self, path: str) -> str | None:
        """The file on disk that holds ``path`` (its cache object); None for a file git holds.
        FileNotFoundError when it is neither in git nor an output of the revision, or is an
        output the local cache lacks."""
        if self.in_git(path):
            return None
        oid = self._object(path)
        if oid is None:
            raise FileNotFoundError(path)
        local = str(self.odb.oid_to_path(oid))
        if not Path(local).is_file():
            raise FileNotFoundError(local)
        return local

    def read_bytes(self, path: str) -> bytes:
        local = self.local(path)
        return self.git.cat_file(path) if local is None else Path(local).read_bytes()

    def close(self) -> None:
        """Nothing held open: each file is opened and closed by its reader."""


class WorkTree:
    """The workspace's files, as they are on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def exists(self, path: str) -> bool:
        return (self.root / path).exists()

    def local(self, path: str) -> str:
        """The file itself; FileNotFoundError when the workspace does not have it."""
        local = self.root / path
        if not local.is_file():
            raise FileNotFoundError(local)
        return str(local)

    def read_bytes(self, path: str) -> bytes:
        return (self.root / path).read_bytes()

    def close(self) -> None:
        """Nothing held open."""


__all__ = ["LockTree", "WorkTree"]
