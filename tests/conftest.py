"""Shared fixtures: the real upstream mirror and scratch copies of it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from stages.core.artifacts import UPSTREAM_NAMES

REPO_ROOT = Path(__file__).resolve().parents[1]
UPSTREAM_FILES = UPSTREAM_NAMES


def find_mirror() -> Path:
    """The byte-exact upstream mirror every developer and CI machine has beside the repo."""
    env = os.environ.get("RIMO_MIRROR")
    candidates = [Path(env)] if env else []
    # The mirror lies beside the checkout (../shared/rimo/upstream), wherever that is.
    candidates.append(REPO_ROOT.parent / "shared/rimo/upstream")
    for cand in candidates:
        if all((cand / name).is_file() for name in UPSTREAM_FILES):
            return cand.resolve()
    raise RuntimeError(f"RIMO upstream mirror not found; tried {candidates} (set RIMO_MIRROR)")


@pytest.fixture(scope="session")
def mirror_dir() -> Path:
    return find_mirror()


@pytest.fixture
def raw_dir(tmp_path: Path, mirror_dir: Path) -> Path:
    """A writable copy of the four upstream files, for tests that corrupt them."""
    out = tmp_path / "raw"
    out.mkdir()
    for name in UPSTREAM_FILES:
        shutil.copyfile(mirror_dir / name, out / name)
    return out
