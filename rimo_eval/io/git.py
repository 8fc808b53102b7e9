"""The one way the project asks git something: a subprocess that never raises.

Provenance (HEAD, dirty sources) and audit (is a recorded commit known here) use it; compare
resolves revisions through DVC's own SCM (``dvc.repo.Repo(...).scm``), which also knows
experiment refs.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence


def git(cwd: str | os.PathLike[str], *args: str) -> str | None:
    """stdout of ``git args`` in ``cwd``; None when git is missing, fails or times out."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def head_commit(cwd: str | os.PathLike[str]) -> str | None:
    out = git(cwd, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    return out.strip() if out else None


def is_dirty(cwd: str | os.PathLike[str], paths: Sequence[str]) -> bool | None:
    """Whether ``paths`` differ from HEAD (untracked files included); None if git cannot say."""
    out = git(cwd, "status", "--porcelain", "--", *paths)
    return None if out is None else bool(out.strip())


def has_commit(cwd: str | os.PathLike[str], commit: str) -> bool | None:
    """Whether the repository at ``cwd`` has ``commit``; None when git cannot tell (no repo)."""
    if git(cwd, "rev-parse", "--git-dir") is None:
        return None
    return git(cwd, "cat-file", "-e", f"{commit}^{{commit}}") is not None


__all__ = ["git", "has_commit", "head_commit", "is_dirty"]
