"""dvc.lock against the workspace: which stages made the metrics, and whether their deps,
outs and params are still what DVC recorded.

Hashes come from DVC itself (dvc_data's ``build`` with the repo's .dvcignore, the repo's
cache for the folder listings a lock refers to), so they are exactly what ``dvc status``
compares; the audit only adds naming the file inside a folder and the params key that
changed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from rimo_eval.artifacts.paths import LOCK_PATH
from rimo_eval.commands.audit.ledger import MISSING, Ledger, shown
from rimo_eval.errors import DataError
from rimo_eval.params.yaml_file import load_unique


class DvcHashes:
    """md5s the way dvc.lock records them, computed by DVC for the repo at ``root``."""

    def __init__(self, root: Path) -> None:
        from dvc.repo import Repo

        self.root = Path(root).resolve()
        self.repo = Repo(os.fspath(self.root))
        self._cache: dict[str, Any] = {}

    def close(self) -> None:
        self.repo.close()

    def _object(self, rel: str) -> Any:
        from dvc_data.hashfile.build import build

        if rel not in self._cache:
            path = self.root / rel
            if not path.exists():
                self._cache[rel] = None
            else:
                _, _, obj = build(self.repo.cache.local, os.fspath(path), self.repo.fs, "md5",
                                  dry_run=True, ignore=self.repo.dvcignore)
                self._cache[rel] = obj
        return self._cache[rel]

    def md5(self, rel: str) -> str | None:
        obj = self._object(rel)
        return None if obj is None else str(obj.hash_info.value)

    def listing(self, rel: str) -> dict[str, str]:
        """relpath -> md5 of every file DVC hashes under the folder ``rel``."""
        from dvc_data.hashfile.tree import Tree

        obj = self._object(rel)
        if not isinstance(obj, Tree):
            return {}
        return {"/".join(key): str(hi.value) for key, _, hi in obj}

    def cached_listing(self, dir_md5: str) -> dict[str, str] | None:
        """The folder listing DVC's cache holds for ``dir_md5``, if it has it."""
        from dvc_data.hashfile.hash_info import HashInfo
        from dvc_data.hashfile.tree import Tree
        from dvc_objects.errors import ObjectFormatError

        try:
            tree = Tree.load(self.repo.cache.local, HashInfo("md5", dir_md5))
        except (OSError, ValueError, ObjectFormatError):
            return None
        return {"/".join(key): str(hi.value) for key, _, hi in tree}


def parse_lock(text: str, where: str = str(LOCK_PATH)) -> dict[str, Any] | None:
    """A dvc.lock's content; None when it has no stages."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise DataError(f"{where}: invalid YAML: {exc}") from exc
    return data if isinstance(data, dict) and isinstance(data.get("stages"), dict) else None


def load_lock(root: Path) -> dict[str, Any] | None:
    path = root / LOCK_PATH
    if not path.is_file():
        return None
    return parse_lock(path.read_text(encoding="utf-8"))


def covers(out: str, path: str) -> bool:
    return path == out or path.startswith(out.rstrip("/") + "/")


def producer(lock: Mapping[str, Any], path: str) -> str | None:
    """The lock stage whose outputs include ``path`` (or a folder holding it)."""
    for name, stage in lock["stages"].items():
        if any(covers(o["path"], path) for o in stage.get("outs") or []):
            return str(name)
    return None


def upstream_stages(lock: Mapping[str, Any], target: str) -> list[str]:
    """The stage producing ``target`` and every stage it transitively depends on, in lock order.
    Later stages (the report) are not part of where a metric came from."""
    start = producer(lock, target)
    if start is None:
        return []
    seen, todo = {start}, [start]
    while todo:
        for dep in lock["stages"][todo.pop()].get("deps") or []:
            src = producer(lock, dep["path"])
            if src is not None and src not in seen:
                seen.add(src)
                todo.append(src)
    return [name for name in lock["stages"] if name in seen]


def lookup(data: Any, dotted: str) -> Any:
    """A params value by DVC's key: a section name or a dotted path into it."""
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return MISSING
        data = data[part]
    return data


def lock_param(lock: Mapping[str, Any], stage: str, key: str) -> Any:
    """A params value as dvc.lock recorded it for ``stage`` (under a section or dotted key)."""
    for values in (lock["stages"][stage].get("params") or {}).values():
        for recorded, value in (values or {}).items():
            if key == recorded:
                return value
            if key.startswith(f"{recorded}."):
                found = lookup(value, key[len(recorded) + 1:])
                if found is not MISSING:
                    return found
    return MISSING


def first_difference(recorded: Any, current: Any, key: str) -> tuple[str, Any, Any] | None:
    if isinstance(recorded, dict) and isinstance(current, dict):
        for k in [*recorded, *(k for k in current if k not in recorded)]:
            diff = first_difference(recorded.get(k, MISSING), current.get(k, MISSING),
                                    f"{key}.{k}")
            if diff:
                return diff
        return None
    return None if recorded == current else (key, recorded, current)


def changed_files(hashes: DvcHashes, path: str, want: str) -> list[tuple[str, str]]:
    """(path, what differs) for a mismatch; inside a folder, down to the files that changed
    when DVC's cache still has the folder listing the lock refers to."""
    got = hashes.md5(path)
    old = hashes.cached_listing(want) if want.endswith(".dir") else None
    if old is None:
        return [(path, f"md5 on disk {got} differs from")]
    now = hashes.listing(path)
    out = []
    for relpath in sorted(old.keys() | now.keys()):
        if old.get(relpath) != now.get(relpath):
            state = ("missing, but listed in" if relpath not in now else
                     "not listed in" if relpath not in old else
                     f"md5 on disk {now[relpath]} (was {old[relpath]}) differs from")
            out.append((f"{path}/{relpath}", state))
    return out or [(path, f"md5 on disk {got} differs from")]


def _check_entry(ledger: Ledger, hashes: DvcHashes, name: str, kind: str,
                 entry: Mapping[str, Any], owner: str | None) -> None:
    path, want = entry["path"], entry.get("md5")
    if entry.get("hash", "md5") != "md5" or not want:
        ledger.warn("lock.md5", path, f"{path}: dvc.lock ({name} {kind}) records no plain "
                    f"md5; not checked", owner)
        return
    got = hashes.md5(path)
    if got is None:
        ledger.broke("lock.md5", path, f"{path}: missing on disk; dvc.lock ({name} {kind}) "
                     f"expects md5 {want}", owner)
    elif got != want:
        for file, detail in changed_files(hashes, path, want):
            ledger.broke("lock.md5", file, f"{file}: {detail} dvc.lock ({name} {kind}: "
                         f"{want}): changed after the stage ran (edited by hand, or the lock "
                         f"is stale)", owner)
    else:
        ledger.ok("lock.md5", path, f"{path}: md5 matches dvc.lock ({name} {kind})", owner)


def check_lock(ledger: Ledger, root: Path, lock: Mapping[str, Any], stages: Iterable[str],
               hashes: DvcHashes, artifacts: set[str]) -> None:
    """Every dep and out of ``stages`` on disk against dvc.lock, and its params against the
    params files now: a mismatch means an edited artifact or a lock older than its inputs."""
    params_files: dict[str, Any] = {}
    for name in stages:
        stage = lock["stages"][name]
        for kind in ("deps", "outs"):
            for entry in stage.get(kind) or []:
                # A stage's own code is an input of all it makes; data is named by its path.
                owner = None if kind == "outs" or any(covers(entry["path"], a)
                                                      for a in artifacts) else name
                _check_entry(ledger, hashes, name, kind, entry, owner)
        for pfile, values in (stage.get("params") or {}).items():
            if pfile not in params_files:
                try:
                    params_files[pfile] = load_unique(
                        (root / pfile).read_text(encoding="utf-8"), pfile) or {}
                except (OSError, ValueError, yaml.YAMLError) as exc:  # ValueError: a key twice
                    ledger.broke("lock.params", pfile, f"{pfile}: cannot read ({exc})", name)
                    params_files[pfile] = {}
            for key, recorded in (values or {}).items():
                diff = first_difference(recorded, lookup(params_files[pfile], key), key)
                ledger.verdict(
                    diff is None, "lock.params", str(LOCK_PATH),
                    f"{pfile} {key} matches dvc.lock ({name})",
                    "" if diff is None else f"dvc.lock is stale: {pfile} {diff[0]} is "
                    f"{shown(diff[2])}, dvc.lock ({name}) recorded {shown(diff[1])}; rerun "
                    f"`dvc repro`", name)


__all__ = ["DvcHashes", "changed_files", "check_lock", "covers", "first_difference",
           "load_lock", "lock_param", "lookup", "parse_lock", "producer", "upstream_stages"]
