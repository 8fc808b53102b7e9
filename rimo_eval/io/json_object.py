"""Reading a JSON file that must hold one object: the one reader every command uses, so a
broken file is always an error naming it (DataError), never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rimo_eval.errors import DataError


def parse_object(raw: str | bytes, where: str) -> dict[str, Any]:
    """``raw`` as a JSON object; ``where`` names it in the error (a path, maybe at a revision)."""
    try:
        data = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and undecodable bytes
        raise DataError(f"{where}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise DataError(f"{where}: expected a JSON object, found {type(data).__name__}")
    return data


def read_object(path: str | os.PathLike[str], where: str | None = None,
                hint: str = "") -> dict[str, Any]:
    """The object in ``path``; a missing file is a DataError too, with ``hint`` (what makes it)."""
    shown = where or Path(path).as_posix()
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError as exc:
        raise DataError(f"{shown}: not found{f' ({hint})' if hint else ''}") from exc
    return parse_object(raw, shown)


__all__ = ["parse_object", "read_object"]
