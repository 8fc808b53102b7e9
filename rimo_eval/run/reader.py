"""``RunReader``: opens runs for one command, with one DVC repository handle for all of them.

The handle (``dvc.repo.Repo`` of the workspace) resolves names, lists experiments, checks the
workspace's outputs (DVC's index, built once) and gives the local cache; every other revision
is read through git's tree at its commit and its dvc.lock (rimo_eval.run.tree), so no DVC
index is built per run. Nothing is checked out; ``close`` (or the ``with`` block) releases
the handle.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.judge_record import read as judge_record
from rimo_eval.artifacts.metrics_files import k_of
from rimo_eval.artifacts.missing import absent_outputs
from rimo_eval.artifacts.model_name import recorded_model
from rimo_eval.artifacts.paths import (
    BREAKDOWN_PATH,
    JUDGE_METRICS_PATH,
    METRICS_PATH,
    MODEL_PATH,
    PROVENANCE_PATH,
    predictions_path,
)
from rimo_eval.errors import ConfigError, DataError, StageError
from rimo_eval.io.git import git
from rimo_eval.io.json_object import parse_object
from rimo_eval.rimo.tracks import TRACKS
from rimo_eval.run.files import RunFiles
from rimo_eval.run.record import Run
from rimo_eval.run.recovery import advice, missing_message
from rimo_eval.run.revision import WORKSPACE, Revision
from rimo_eval.run.tree import LockTree, WorkTree


class RunReader:
    """``with RunReader(root) as reader: run = reader.open("exp-1")``."""

    def __init__(self, root: Path | str = ".") -> None:
        self.root = Path(root).resolve()
        self._repo: Any = None
        self._trees: dict[str | None, LockTree | WorkTree] = {}
        self._files: dict[Revision, RunFiles] = {}
        self._experiments: list[Revision] | None = None

    def __enter__(self) -> RunReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for tree in self._trees.values():
            tree.close()
        self._trees.clear()
        self._files.clear()
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    @property
    def repo(self) -> Any:
        """The workspace's ``dvc.repo.Repo``, opened once."""
        if self._repo is None:
            from dvc.exceptions import DvcException
            from dvc.repo import Repo

            try:
                self._repo = Repo(os.fspath(self.root))
            except DvcException as exc:
                raise ConfigError(f"{self.root}: not a DVC repository ({exc})") from exc
        return self._repo

    # --- names -------------------------------------------------------------------------------

    def resolve(self, name: str) -> Revision:
        """A git revision (branch, tag, sha, HEAD~1...) first, else a DVC experiment name, in
        DVC's own order (its SCM knows the experiment refs)."""
        if name == WORKSPACE:
            return Revision(name, WORKSPACE, None)
        from dvc.exceptions import DvcException
        from dvc.repo.experiments.utils import resolve_name
        from dvc.scm import RevError, resolve_rev

        try:
            scm = self.repo.scm
            sha = resolve_rev(scm, name)
            found = resolve_name(scm, [name]).get(name)
            if found is not None and scm.get_ref(str(found)) == sha:
                return Revision(name, "experiment", sha, str(found))
            return Revision(name, "git", sha)
        except RevError as exc:
            raise ConfigError(f"{name}: not a git revision, branch or DVC experiment in this "
                              f"repository (see `git branch` and `dvc exp show`): {exc}"
                              ) from exc
        except DvcException as exc:
            raise ConfigError(f"{name}: cannot resolve: {exc}") from exc

    def experiments(self) -> list[Revision]:
        """Every DVC experiment of the workspace's baseline (HEAD), by name: what ``--all``
        means."""
        if self._experiments is None:
            from dvc.exceptions import DvcException
            from dvc.scm import SCMError

            try:
                found = self.repo.experiments.ls(rev="HEAD")
            except (DvcException, SCMError) as exc:
                raise ConfigError(f"cannot list the DVC experiments of HEAD: {exc}") from exc
            exps = sorted((name, sha) for entries in found.values()
                          for name, sha in entries if sha)
            self._experiments = [self.resolve(name) for name, _ in exps]
        return self._experiments

    def commit_date(self, revision: Revision) -> str | None:
        """The revision's commit date (ISO 8601, committer's), None for the workspace: a fact
        of the commit, so a rebuilt leaderboard shows the same date."""
        if revision.rev is None:
            return None
        out = git(self.root, "show", "-s", "--format=%cI", revision.rev)
        return out.strip() or None if out else None

    # --- files -------------------------------------------------------------------------------

    def files(self, revision: Revision) -> RunFiles:
        """The revision's files: the workspace's on disk; another revision's through git and
        its dvc.lock (rimo_eval.run.tree), with no DVC index of that revision built."""
        if revision.rev not in self._trees:
            if revision.rev is None:
                self._trees[None] = WorkTree(self.root)
            else:
                from dvc.scm import SCMError

                try:
                    git = self.repo.scm.get_fs(revision.rev)
                except SCMError as exc:
                    raise StageError(f"{revision.where}: not readable by git: {exc}") from exc
                self._trees[revision.rev] = LockTree(git, self.repo.cache.local)
        if revision not in self._files:  # one per revision and name, for every read
            self._files[revision] = RunFiles(revision, self._trees[revision.rev])
        return self._files[revision]

    def absent(self, revision: Revision, paths: Iterable[str | os.PathLike[str]]
               ) -> list[tuple[str, bool]]:
        """(path, in the local cache) of each DVC output in ``paths`` that ``revision`` lacks:
        the workspace by DVC's own index of it (rimo_eval.artifacts.missing), another revision by
        its dvc.lock and the cache."""
        if revision.rev is None:
            # A workspace output is absent when its path is: with every path here, nothing is
            # absent and DVC's Repo (a second of imports and its index: the view stage's
            # largest cost, issue 43) is not opened. Only a missing path needs DVC to tell an
            # output (and whether its cache holds it) from a file of ours.
            wanted = list(paths)
            if all((self.root / p).exists() for p in wanted):
                return []
            from dvc.exceptions import DvcException

            try:
                return absent_outputs(self.repo, self.root, True, wanted)
            except DvcException as exc:
                raise StageError(f"dvc.lock at {revision.where}: not readable by DVC: "
                                 f"{exc}") from exc
        tree = self.files(revision).fs
        absent = []
        for path in sorted({Path(p).as_posix() for p in paths}):
            if not tree.in_git(path) and tree.cached(path) is False:
                absent.append((path, False))
        return absent

    def require(self, revision: Revision, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Raise a StageError naming every output in ``paths`` that is not here and what brings
        it back in this repository (rimo_eval.run.recovery)."""
        absent = self.absent(revision, paths)
        if absent:
            raise StageError(self.missing_message(revision, [p for p, _ in absent],
                                                  all(c for _, c in absent)))

    def experiment_names(self) -> list[str]:
        try:
            return [r.label for r in self.experiments()]
        except ConfigError:
            return []

    def missing_message(self, revision: Revision, absent: Sequence[str],
                        in_cache: bool = False) -> str:
        return missing_message(self.root, revision, absent, in_cache, self.experiment_names())

    def advice(self, revision: Revision, in_cache: bool = False) -> str:
        """What brings ``revision``'s outputs back here (rimo_eval.run.recovery.advice)."""
        return advice(self.root, revision, in_cache, self.experiment_names())

    # --- runs --------------------------------------------------------------------------------

    def open(self, run: str | Revision, needed: Iterable[str | os.PathLike[str]] = ()
             ) -> Run:
        """The run, once every output in ``needed`` is known to be here (else the recovery
        message). Its tables are read when asked, while this reader is open."""
        revision = self.resolve(run) if isinstance(run, str) else run
        needed = list(needed)
        if needed:
            self.require(revision, needed)
        files = self.files(revision)
        metrics_bytes = files.read_bytes(METRICS_PATH)
        metrics = parse_object(metrics_bytes, f"{METRICS_PATH.as_posix()} at {files.where}")
        provenance = files.read_json(PROVENANCE_PATH, False) or {}
        params: dict[str, Any] = {}
        error = None
        try:
            params = files.read_params()
        except DataError as exc:
            error = str(exc)
        prov_bytes = files.read_bytes(PROVENANCE_PATH) if provenance else b""
        return Run(revision=revision, metrics=metrics,
                   breakdown=files.read_json(BREAKDOWN_PATH, False) or {},
                   provenance=provenance,
                   judge=judge_record(files.read_json(JUDGE_METRICS_PATH, False)),
                   params=params, model=self._model(files, provenance), k=k_of(metrics),
                   content=hashlib.sha256(metrics_bytes + b"\0" + prov_bytes).hexdigest(),
                   params_error=error, files=files)

    @staticmethod
    def _model(files: RunFiles, provenance: dict[str, Any]) -> str:
        """reports/model.json's string (what `dvc exp show` shows); for a run from before it,
        the same rule applied to what its predictions record."""
        recorded = (files.read_json(MODEL_PATH, False) or {}).get("model")
        if isinstance(recorded, str) and recorded:
            return recorded
        for track in TRACKS:
            try:
                frame = files.read_parquet(predictions_path(track), ["backend", "backend_params"])
            except (DataError, KeyError, ValueError):
                continue
            if len(frame):
                return recorded_model(str(frame["backend"].iloc[0]),
                                      frame["backend_params"].iloc[0])
        backends = sorted({str(b.get("backend")) for b in
                           (provenance.get("predictions") or {}).values()
                           if isinstance(b, dict) and b.get("backend")})
        return "+".join(backends) or "-"


def open_run(revision: str | Revision, root: Path | str = ".",
             needed: Iterable[str | os.PathLike[str]] = ()) -> tuple[RunReader, Run]:
    """One run and the reader that holds it open (close the reader when done)."""
    reader = RunReader(root)
    try:
        return reader, reader.open(revision, needed)
    except BaseException:
        reader.close()
        raise


__all__ = ["RunReader", "open_run"]
