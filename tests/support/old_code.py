"""Running the code of an old commit (``git archive`` of its ``stages/`` package) beside today's
installed ``rimo_eval``, to prove a change left a number where it was."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

# The old code finds its backends through the ``rimo_eval.predictors`` entry points, which the
# installed package now points at ``rimo_eval.*``: a preamble sends them to the old ``stages.*``.
_OLD_ENTRY_POINTS = (
    "import importlib, importlib.metadata as md\n"
    "_load = md.EntryPoint.load\n"
    "def _old_load(ep):\n"
    "    if ep.group == 'rimo_eval.predictors' and ep.value.startswith('rimo_eval.'):\n"
    "        mod, _, attr = ep.value.replace('rimo_eval.', 'stages.', 1).partition(':')\n"
    "        return getattr(importlib.import_module(mod), attr)\n"
    "    return _load(ep)\n"
    "md.EntryPoint.load = _old_load\n"
)


def extract_old_package(repo_root: Path, commit: str, dest: Path) -> Path | None:
    """``dest`` holding the commit's ``stages/`` package, or None in a clone that lacks it."""
    archive = subprocess.run(["git", "archive", "--format=tar", commit, "stages"],
                             cwd=repo_root, capture_output=True)
    if archive.returncode != 0:
        return None  # a shallow clone lacks the commit
    dest.mkdir(parents=True, exist_ok=True)
    tar_path = dest.with_suffix(".tar")
    tar_path.write_bytes(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(dest, filter="data")
    return dest


def run_old_code(old: Path, code: str, *args: str) -> None:
    """Run ``code`` (which imports ``stages``) with the old package first on the path."""
    env = {**os.environ, "PYTHONPATH": str(old)}
    subprocess.run([sys.executable, "-c", _OLD_ENTRY_POINTS + code, *args], env=env, cwd=old,
                   check=True, capture_output=True)
