"""A baseline revision's package, extracted to run beside today's: before 1.0 it was ``stages``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGES = ("rimo_eval", "stages")  # today's name first; `stages` before the 1.0 rename


def extract(root: Path, rev: str, into: Path) -> Path | None:
    """``into`` holding the package of ``rev``, or None (said on stderr) if the clone lacks it."""
    for package in PACKAGES:
        archive = subprocess.run(["git", "-C", str(root), "archive", rev, package],
                                 capture_output=True)
        if archive.returncode == 0:
            into.mkdir(parents=True, exist_ok=True)
            subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
            return into
    print(f"baseline {rev} not available ({archive.stderr.decode().strip()}): skipped",
          file=sys.stderr)
    return None


def package(tree: Path) -> str:
    """The import name of the package in ``tree`` (the repository root or an extracted one)."""
    return next((p for p in PACKAGES if (tree / p).is_dir()), PACKAGES[0])
