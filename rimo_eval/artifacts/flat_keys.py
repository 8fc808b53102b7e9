"""Nested dicts as flat dotted keys: how audit, compare and the report name a metric."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flatten(data: Mapping[str, Any], prefix: str = "", *, sort: bool = False,
            keep_empty: bool = True) -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``, in the mapping's own order (``sort``: each level's
    keys sorted as strings). An empty mapping is a leaf (``{"a": {}}`` keeps ``"a": {}``), so
    audit sees a section that lost all its keys; ``keep_empty=False`` drops it (a table)."""
    out: dict[str, Any] = {}
    keys = sorted(data, key=str) if sort else list(data)
    for key in keys:
        name, value = f"{prefix}{key}", data[key]
        if isinstance(value, Mapping) and (value or not keep_empty):
            out.update(flatten(value, f"{name}.", sort=sort, keep_empty=keep_empty))
        else:
            out[name] = value
    return out


__all__ = ["flatten"]
