"""A small git project for the sweep's tests: the real params.yaml committed, pushed to a bare
remote `origin`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import env


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True, env=env()).stdout


def pushed_project(tmp_path: Path) -> Path:
    """``tmp_path/work``: the project's params.yaml committed on main and pushed to
    ``tmp_path/origin.git``."""
    work, origin = tmp_path / "work", tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    shutil.copy(REPO_ROOT / "params.yaml", work / "params.yaml")
    git(work, "add", "params.yaml")
    git(work, "commit", "-qm", "params")
    git(work, "remote", "add", "origin", str(origin))
    git(work, "push", "-q", "origin", "main")
    return work
