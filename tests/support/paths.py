"""Where the repository and the upstream mirror are: one place for tests, helpers and conftest."""

from __future__ import annotations

import os
from pathlib import Path

from rimo_eval.artifacts.paths import UPSTREAM_NAMES

REPO_ROOT = Path(__file__).resolve().parents[2]
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
