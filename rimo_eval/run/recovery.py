"""What brings a run's missing tables back, in THIS repository: the one message every tool
(audit, view, compare, summary, leaderboard) gives for a table that is not there.

``dvc pull`` helps only where a DVC remote is configured; without one, the outputs come from
this clone's own cache (``dvc checkout``), from an experiment (``dvc exp apply NAME``), or,
when nothing has run here yet (a fresh clone), from running the pipeline (``make repro``).
"""

from __future__ import annotations

import configparser
from collections.abc import Sequence
from pathlib import Path

from rimo_eval.run.revision import Revision

REPRO = "`make repro` (or `dvc repro`) runs the pipeline here"


def has_remote(root: Path) -> bool:
    """Whether a DVC remote is configured (``.dvc/config`` or ``config.local``): only then can
    ``dvc pull`` bring anything back."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read([root / ".dvc/config", root / ".dvc/config.local"], encoding="utf-8")
    except configparser.Error:
        return False
    return any(s.startswith("remote ") or s.startswith("'remote ") for s in parser.sections())


def advice(root: Path, revision: Revision, in_cache: bool, experiments: Sequence[str]) -> str:
    """The command that brings ``revision``'s missing outputs back. ``in_cache``: this clone's
    DVC cache holds them (only the workspace's copy is gone); ``experiments``: the names of
    the baseline's experiments (for ``dvc exp apply``)."""
    remote = has_remote(root)
    if revision.rev is None:
        if in_cache:  # e.g. a failed `dvc exp run` removed the outputs of the stage that failed
            return "`dvc checkout` restores them from this clone's DVC cache"
        if remote:
            return "`dvc pull` brings them from the DVC remote"
        if experiments:
            names = ", ".join(experiments[:3]) + (", ..." if len(experiments) > 3 else "")
            return (f"`dvc exp apply NAME` puts an experiment's run in the workspace "
                    f"({names}; see `dvc exp show`), or {REPRO}")
        return f"nothing has run in this clone yet: {REPRO}"
    if remote:
        return (f"`dvc exp pull <git-remote> {revision.label}` brings them (the experiment's "
                f"`dvc pull`)" if revision.kind == "experiment" else
                f"`dvc fetch --rev {revision.rev}` brings them from the DVC remote")
    return (f"no DVC remote is configured (`dvc remote list`), so only a run made in this "
            f"clone is in its cache: rerun {revision.label} here (`dvc exp run`), or "
            f"{REPRO}")


def missing_message(root: Path, revision: Revision, absent: Sequence[str], in_cache: bool,
                    experiments: Sequence[str]) -> str:
    where = ("the workspace" if revision.rev is None else
             f"the local DVC cache for {revision.where}")
    return (f"{len(absent)} DVC-tracked output(s) of {revision.label} missing from {where}: "
            f"{', '.join(absent)}. "
            f"{advice(root, revision, in_cache, experiments)}.")


__all__ = ["REPRO", "advice", "has_remote", "missing_message"]
