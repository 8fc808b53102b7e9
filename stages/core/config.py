"""Reading ``params.yaml``: each stage takes its own section."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from stages.core.errors import StageError

DEFAULT_PARAMS = Path("params.yaml")


def load_params(path: str | os.PathLike[str] = DEFAULT_PARAMS) -> dict[str, Any]:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except FileNotFoundError as exc:
        raise StageError(f"{path}: params file not found (run from the project root)") from exc
    except yaml.YAMLError as exc:
        raise StageError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise StageError(f"{path}: expected a mapping of stage sections at the top level")
    return data


def section(params: dict[str, Any], name: str, path: str | os.PathLike[str] = DEFAULT_PARAMS
            ) -> dict[str, Any]:
    value = params.get(name)
    if not isinstance(value, dict):
        raise StageError(f"{path}: missing or invalid section '{name}'")
    return value
