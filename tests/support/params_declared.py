"""What each DVC stage of dvc.yaml declares in params.yaml, and whether a params key is covered by
it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import REPO_ROOT


def dvc_stages(root: Path = REPO_ROOT) -> dict[str, Any]:
    return yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def declared(stage: dict[str, Any]) -> list[str]:
    keys: list[str] = []
    for entry in stage.get("params") or []:
        # A bare key is in params.yaml; {file: [keys]} names another file (none here).
        keys += [entry] if isinstance(entry, str) else [k for v in entry.values() for k in v]
    return keys


def covered(path: str, keys: list[str]) -> bool:
    return any(path == k or path.startswith(f"{k}.") for k in keys)
