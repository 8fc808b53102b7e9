"""Numbers as the artifacts store them and as people read them: one rounding, one test for a
missing value, one percentage format."""

from __future__ import annotations

from typing import Any

DIGITS = 6  # stable across summation order, enough for a 1/335 step
DASH = "—"  # what a table shows for a missing number


def rounded(x: float | None) -> float | None:
    """A metric as the artifacts store it: a float rounded to six digits; None stays None."""
    return None if x is None else round(float(x), DIGITS)


def significant(x: float | None, digits: int = DIGITS) -> float | None:
    """A p-value as the artifacts store it: six significant digits, so a tiny one is not
    rounded to 0 as six decimals would; None stays None."""
    return None if x is None else float(f"{float(x):.{digits}g}")


def absent(value: Any) -> bool:
    """None, or the NaN that pandas puts in a null cell of a Parquet column."""
    return value is None or (isinstance(value, float) and value != value)


def pct(value: Any, dash: str = DASH) -> str:
    """A rate as a percentage with one decimal ("57.1%"); ``dash`` for a missing value or
    anything that is not a number (a bool or a string included; numpy numbers are numbers)."""
    if absent(value) or isinstance(value, bool | str):
        return dash
    try:
        return f"{float(value):.1%}"
    except (TypeError, ValueError):
        return dash


__all__ = ["DASH", "DIGITS", "absent", "pct", "rounded", "significant"]
