"""Nested dicts as flat dotted keys: how audit, compare and the report name a metric."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``, in the mapping's own order. An empty mapping is a
    leaf (``{"a": {}}`` keeps ``"a": {}``), so a section that lost all its keys stays visible."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


__all__ = ["flatten"]
