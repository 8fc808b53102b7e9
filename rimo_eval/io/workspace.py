"""Locations every run of the repository shares, wherever DVC executes the stage.

``dvc exp run --queue`` and ``--temp`` run each experiment in a temporary copy of the repo
(``.dvc/tmp/exps/...``) and set ``DVC_ROOT`` to the main working tree; a plain ``dvc repro``
sets it to the same tree. A relative cache folder from params.yaml is therefore resolved
against ``DVC_ROOT``, so queued experiments reuse the workspace's response cache instead of
starting an empty one in a copy that is deleted afterwards. Outside DVC it is the current
folder, as before.
"""

from __future__ import annotations

import os
from pathlib import Path

DVC_ROOT_ENV = "DVC_ROOT"


def project_root() -> Path:
    """The main working tree of the DVC project, or the current folder outside DVC."""
    root = os.environ.get(DVC_ROOT_ENV)
    return Path(root) if root and Path(root).is_dir() else Path(".")


def shared_path(path: str | os.PathLike[str]) -> Path:
    """An absolute path as given; a relative one against the project's main working tree."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else project_root() / p
