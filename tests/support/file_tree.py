"""What a folder holds, to prove a tool left it as it was."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` (links as links, not followed) -> its content's digest."""
    found = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[rel] = "dir"
    return found
