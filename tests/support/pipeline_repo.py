"""A throwaway git + DVC repo holding the current working tree, for end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import REPO_ROOT

BIN = Path(sys.executable).parent


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}{os.pathsep}{e.get('PATH', '')}"
    e["DVC_NO_ANALYTICS"] = "1"
    e.setdefault("GIT_AUTHOR_NAME", "test")
    e.setdefault("GIT_AUTHOR_EMAIL", "test@example.invalid")
    e.setdefault("GIT_COMMITTER_NAME", "test")
    e.setdefault("GIT_COMMITTER_EMAIL", "test@example.invalid")
    return e


def sh(cwd: Path, *args: str, check: bool = True, timeout: float = 900
       ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def tracked_files() -> list[str]:
    """Tracked and untracked-but-not-ignored files: the tree a fresh clone plus edits has."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=REPO_ROOT, capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and (REPO_ROOT / f).is_file()]


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` laid on it; nested mappings are merged, not replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def make_repo(dest: Path, mirror: Path, predict: dict[str, Any] | None = None) -> Path:
    """Copy the project into ``dest`` as a new git repo, point fetch at ``mirror``."""
    for rel in tracked_files():
        if rel.startswith(("data/raw", "data/items", "data/predictions", "data/scores")):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, target)
    # Artifacts of the source checkout (lock, metrics) must not leak into the test repo.
    for rel in ("dvc.lock", "reports/params_check.json", "reports/metrics.json",
                "reports/breakdown.json", "reports/provenance.json", "reports/validation.json",
                "reports/judge.json"):
        (dest / rel).unlink(missing_ok=True)
    params_path = dest / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["fetch"]["mirrors"] = [str(mirror)]
    params["fetch"]["url_template"] = "http://127.0.0.1:9/{file}"  # never the real network
    # Merged key by key: dvc.yaml declares predict params by key (predict.openai.seed, ...), so a
    # section given in part keeps the project's other keys.
    params["predict"] = merged(params["predict"], predict or {"backend": "oracle", "limit": None})
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    sh(dest, "git", "init", "-q", "-b", "main")
    sh(dest, "git", "add", "-A")
    sh(dest, "git", "commit", "-qm", "test repo")
    return dest



def copy_repo(src: Path, dest: Path) -> Path:
    """A private copy of a built repo (git, workspace and DVC cache) that a test may change.

    The workspace holds copies of the cache files, not links (cache.type is DVC's default
    reflink,copy), so nothing in ``dest`` points back into ``src``. ``.dvc/tmp`` (locks, the
    hash state keyed by inode) stays behind: DVC starts it afresh and rehashes what it checks.
    """
    dvc_tmp = (src / ".dvc" / "tmp").resolve()

    def skip(folder: str, names: list[str]) -> list[str]:
        return ["tmp"] if Path(folder).resolve() == dvc_tmp.parent else []

    shutil.copytree(src, dest, symlinks=True, ignore=skip)
    return dest


def stop_workers(repo: Path, *, kill: bool = False) -> None:
    """``dvc queue stop``, then wait for this repo's workers to exit and SIGKILL any left: a
    worker whose idle monitor died (dvc-task's, on a control message read half-written while
    the other worker shut down) never exits on its own, and while one lives each DVC command
    that asks the queue waits on its replies."""
    sh(repo, "dvc", "queue", "stop", *(["--kill"] if kill else []), check=False)
    pids = []
    for pid_file in (repo / ".dvc/tmp/exps/celery").glob("dvc-exp-worker-*.pid"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text().strip())
            if "queue-worker" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                pids.append(pid)
    deadline = time.monotonic() + 30
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        time.sleep(0.2)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
