"""The one JSONL reader: strict JSON per line, lines split the same way everywhere.

Used by validate (upstream files) and replay (prediction files). Strict means what Python's
json module lets through but JSON does not is refused: NaN, Infinity, -Infinity. Nesting deep
enough to exhaust the recursion limit is a ValueError like any other bad line, not a crash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_line(text: str, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None
               ) -> Any:
    """One record; ValueError (with json's position) when the line is not strict JSON."""
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook,
                          parse_constant=_reject_constant)
    except RecursionError as exc:
        raise ValueError(f"nested too deeply: {exc}") from exc


def noting_repeats(repeats: list[str]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """An object_pairs_hook for parse_line that appends each repeated key to ``repeats``
    (json.loads alone keeps the last copy silently)."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                repeats.append(key)
            obj[key] = value
        return obj
    return hook


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line) split at LF only, a CRLF's CR dropped; the terminator of the
    last line does not make an extra empty line. Blank lines are yielded: callers decide."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        yield number, line.removesuffix("\r")
