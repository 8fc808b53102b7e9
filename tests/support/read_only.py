"""A folder seen read-only, as a real read-only mount: commands run inside a private mount
namespace (``unshare -m``) where the folder is bind-mounted read-only over itself, so the mount
ends with the command and nothing outside it sees it. Root is not stopped by file modes, so
``chmod`` would prove nothing here; a read-only mount stops root too. Where the machine cannot
make one (not root, no ``unshare``, a container without the capability) the test is skipped
with the reason."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT


def _mount(folder: Path) -> str:
    q = shlex.quote(str(folder))
    return f"mount --bind {q} {q} && mount -o remount,bind,ro {q}"


@cache
def _unavailable() -> str | None:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare or mount is not installed"
    probe = Path("/tmp")
    done = subprocess.run(["unshare", "-m", "sh", "-c",
                           f"{_mount(probe)} && ! touch {probe}/.rimo-ro-probe 2>/dev/null"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return f"a read-only bind mount cannot be made here: {done.stderr.strip() or 'no'}"
    return None


def need_read_only_mount() -> None:
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)


def run_read_only(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python argv...`` (from the repository root) with ``folder`` mounted read-only."""
    need_read_only_mount()
    command = " ".join(shlex.quote(a) for a in (sys.executable, *argv))
    return subprocess.run(["unshare", "-m", "sh", "-c", f"{_mount(folder)} && exec {command}"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes: what a read-only command must not change."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}
