"""The run-loading layer of the tools (compare, leaderboard, view, audit): a run is named as a
git revision, branch, DVC experiment or the workspace (``resolve``), and its files are read
through DVC at that revision (``RunFiles``: git for tracked files, the DVC cache for outputs),
so nothing is checked out and the workspace is left alone. ``RunAt`` is what every command's
run holds first: the revision and its metrics.json.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from rimo_eval.artifacts.missing import require_outputs
from rimo_eval.artifacts.paths import PARAMS_PATH
from rimo_eval.commands.arguments import WORKSPACE
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.io.git import git
from rimo_eval.io.json_object import parse_object


@dataclass(frozen=True)
class Revision:
    label: str  # as the user wrote it
    kind: str  # workspace | git | experiment
    rev: str | None  # commit sha; None for the workspace
    ref: str | None = None  # refs/exps/... for an experiment

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind, "rev": self.rev, "ref": self.ref}


def resolve(root: Path, name: str) -> Revision:
    """A git revision (branch, tag, sha, HEAD~1...) first, else a DVC experiment name. DVC's
    SCM (``repo.scm``) answers both, in DVC's own order."""
    if name == WORKSPACE:
        return Revision(name, WORKSPACE, None)
    from dvc.exceptions import DvcException
    from dvc.repo import Repo
    from dvc.repo.experiments.utils import resolve_name
    from dvc.scm import RevError, resolve_rev

    try:
        with Repo(os.fspath(root)) as repo:
            sha = resolve_rev(repo.scm, name)
            found = resolve_name(repo.scm, [name]).get(name)
            if found is not None and repo.scm.get_ref(str(found)) == sha:
                return Revision(name, "experiment", sha, str(found))
            return Revision(name, "git", sha)
    except RevError as exc:
        raise ConfigError(f"{name}: not a git revision, branch or DVC experiment in this "
                          f"repository (see `git branch` and `dvc exp show`): {exc}") from exc
    except DvcException as exc:
        raise ConfigError(f"{name}: cannot resolve: {exc}") from exc


def baseline_experiments(root: Path) -> list[Revision]:
    """Every DVC experiment of the workspace's baseline (HEAD), by name: what ``--all`` means.
    Asked through DVC's own API (``repo.experiments.ls``), which knows the exp refs."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(os.fspath(root)) as repo:
            found = repo.experiments.ls(rev="HEAD")
    except DvcException as exc:
        raise ConfigError(f"cannot list the DVC experiments of HEAD: {exc}") from exc
    exps = sorted((name, sha) for entries in found.values() for name, sha in entries if sha)
    return [resolve(root, name) for name, _ in exps]


def commit_date(root: Path, revision: Revision) -> str | None:
    """The revision's commit date (ISO 8601, committer's), None for the workspace: a fact of
    the commit, so a rebuilt leaderboard shows the same date."""
    if revision.rev is None:
        return None
    out = git(root, "show", "-s", "--format=%cI", revision.rev)
    return out.strip() or None if out else None


class RunFiles:
    """The files of one run, read through DVC at its revision: git for tracked files, the DVC
    cache for outputs, so nothing is checked out and the workspace is left alone. Shared by
    every command that reads several runs (compare, leaderboard, view, audit)."""

    def __init__(self, root: Path, revision: Revision) -> None:
        from dvc.api import DVCFileSystem

        self.revision = revision
        self.where = (revision.label if revision.rev is None
                      else f"{revision.label} ({revision.rev[:12]})")
        self.fs = DVCFileSystem(os.fspath(root.resolve()), rev=revision.rev)

    def __enter__(self) -> RunFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.fs.close()

    def exists(self, path: Path) -> bool:
        return bool(self.fs.exists(path.as_posix()))

    def read_bytes(self, path: Path) -> bytes:
        from dvc.exceptions import DvcException

        try:
            data: bytes = self.fs.read_bytes(path.as_posix())
            return data
        except (FileNotFoundError, DvcException) as exc:
            why = "not found" if isinstance(exc, FileNotFoundError) else str(exc)
            raise DataError(f"{path.as_posix()}: not readable at {self.where} ({why}): was the "
                            f"pipeline run and its results committed there, and is the DVC "
                            f"cache complete (`dvc pull`, `dvc exp pull`)?") from exc

    def open(self, path: Path) -> BinaryIO:
        """A seekable binary file (a table read in parts); the caller closes it."""
        from dvc.exceptions import DvcException

        try:
            handle: BinaryIO = self.fs.open(path.as_posix(), "rb")
            return handle
        except (FileNotFoundError, DvcException) as exc:
            raise DataError(f"{path.as_posix()}: not readable at {self.where} ({exc})") from exc

    def read_json(self, path: Path, required: bool = True) -> dict[str, Any] | None:
        """A JSON object; None for an optional file the revision does not have."""
        if not required and not self.exists(path):
            return None  # e.g. a revision from before the breakdown and provenance files
        return parse_object(self.read_bytes(path), f"{path.as_posix()} at {self.where}")

    def read_parquet(self, path: Path, columns: list[str] | None = None) -> pd.DataFrame:
        return pd.read_parquet(io.BytesIO(self.read_bytes(path)), columns=columns)

    def read_params(self) -> dict[str, Any]:
        """params.yaml at the revision; {} where it has none (or holds no mapping)."""
        import yaml

        from rimo_eval.params.yaml_file import DuplicateKeyError, load_unique

        if not self.exists(PARAMS_PATH):
            return {}
        where = f"params.yaml at {self.where}"
        try:  # a key given twice would silently be its last copy
            params = load_unique(self.read_bytes(PARAMS_PATH).decode("utf-8"), where) or {}
        except DuplicateKeyError as exc:
            raise DataError(str(exc)) from exc
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise DataError(f"{where}: not valid YAML: {exc}") from exc
        return params if isinstance(params, dict) else {}


def open_run(root: Path, revision: Revision, needed: list[Path]) -> RunFiles:
    """The revision's files, once every table in ``needed`` is known to be readable: an absent
    one is an error naming each and the ``dvc pull`` / ``dvc exp pull`` that brings it."""
    require_outputs(root, revision.rev, revision.label, revision.kind == "experiment",
                    only=needed)
    return RunFiles(root, revision)


@dataclass
class RunAt:
    """A run at its revision, as every command holds it first: the revision and its
    reports/metrics.json. Each command's run type adds what it reads."""

    revision: Revision
    metrics: dict[str, Any]


__all__ = ["WORKSPACE", "Revision", "RunAt", "RunFiles", "baseline_experiments", "commit_date",
           "open_run", "resolve"]
