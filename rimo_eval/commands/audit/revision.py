"""``rimo-eval audit NAME``: one run of a git revision or DVC experiment, laid out on disk.

The audit checks files on disk the way ``dvc status`` does (DVC's own hashing of the repo at a
root), so auditing another revision means a tree of that revision: a temporary, detached git
worktree at its commit (its dvc.lock, params.yaml and git-tracked reports), whose DVC-tracked
outputs ``dvc checkout`` copies from this repository's cache. The workspace is left alone; the
worktree is removed afterwards. The code that audits is today's, as with compare.

What the audit reads of the run before the checkout (its dvc.lock, which outputs the local
cache lacks and the advice that brings them back) comes through the run reader
(rimo_eval.run): the worktree exists only because the audit recomputes hashes and metrics from
files on disk, as DVC and the stages do.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.paths import LOCK_PATH
from rimo_eval.commands.audit.lock import parse_lock, producer
from rimo_eval.errors import DataError, StageError
from rimo_eval.io.git import git
from rimo_eval.run.reader import RunReader
from rimo_eval.run.revision import Revision


def _git(root: Path, *args: str) -> None:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise StageError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")


def lock_at(reader: RunReader, revision: Revision) -> dict[str, Any] | None:
    """The revision's dvc.lock, read through the run reader; None when it has none."""
    files = reader.files(revision)
    if not files.exists(LOCK_PATH):
        return None
    try:
        text = files.read_bytes(LOCK_PATH).decode("utf-8")
    except (DataError, UnicodeDecodeError):
        return None
    return parse_lock(text, f"{LOCK_PATH} at {revision.label}")


@contextlib.contextmanager
def checked_out(reader: RunReader, revision: Revision,
                outputs: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """A temporary tree of ``revision`` with ``outputs`` (DVC-tracked paths) in place; those
    no stage of the revision's dvc.lock made (the judge table of a run that stopped at the
    score stage, or from before the judge) are left out: DVC has nothing to check out."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    assert revision.rev is not None, "the workspace is audited in place"
    root = reader.root
    lock = lock_at(reader, revision)
    needed = [p for p in outputs
              if lock is not None and producer(lock, Path(p).as_posix()) is not None]
    # Name what the local cache lacks, and what brings it back, before any copying.
    reader.require(revision, needed)
    cache_dir = reader.repo.cache.local_cache_dir
    with tempfile.TemporaryDirectory(prefix="rimo-audit-") as tmp:
        tree = Path(tmp) / "tree"
        _git(root, "worktree", "add", "--detach", "--quiet", os.fspath(tree), revision.rev)
        try:
            # The worktree's DVC reads this repository's cache (config.local is not in git).
            (tree / ".dvc" / "config.local").write_text(f"[cache]\n    dir = {cache_dir}\n",
                                                        encoding="utf-8")
            try:
                if needed:  # no targets would mean every output of the revision
                    with Repo(os.fspath(tree)) as sub:
                        sub.checkout(targets=[os.fspath(tree / p) for p in needed], force=True)
            except DvcException as exc:
                # Paths as the repository names them, not inside the temporary tree.
                why = str(exc).replace(f"{tree}{os.sep}", "")
                raise StageError(f"{revision.label} ({revision.rev[:12]}): cannot check its "
                                 f"outputs out of the DVC cache: {why}") from exc
            yield tree
        finally:
            # Never raises: a failed removal must not hide the audit's own error.
            git(root, "worktree", "remove", "--force", os.fspath(tree))
            git(root, "worktree", "prune")


__all__ = ["checked_out", "lock_at"]
