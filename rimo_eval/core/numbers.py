"""Numbers as the artifacts store them and as people read them: one rounding, one test for a
missing value, one percentage format, one p-value format; and the one Markdown table cell that
every command's Markdown output escapes its text with."""

from __future__ import annotations

import re
from collections.abc import Sequence
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


def pct(value: Any, dash: str = DASH, sign: bool = True) -> str:
    """A rate as a percentage with one decimal ("57.1%"; "57.1" without ``sign``, in a column
    whose header says percent); ``dash`` for a missing value or anything that is not a number
    (a bool or a string included; numpy numbers are numbers)."""
    if absent(value) or isinstance(value, bool | str):
        return dash
    try:
        shown = f"{float(value):.1%}"
    except (TypeError, ValueError):
        return dash
    return shown if sign else shown.removesuffix("%")


def fmt_p(p: float) -> str:
    """A p-value as compare and the leaderboard show it: four significant digits, so a tiny
    one is neither rounded to 0 nor shown with more digits than it has."""
    return f"{p:.4g}"


# What CommonMark reads as markup in text: a "<" that opens a tag or an autolink, a "&" that
# starts an entity. Only those are escaped: the same Markdown is what the terminal shows, where
# "&lt;=1989" or "k &gt; 1" would be noise (issue 43).
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def md_cell(text: Any) -> str:
    """A Markdown table cell: no raw HTML, pipes or line breaks from ids, labels or models;
    every other character as it is (``<=1989``, ``k > 1``)."""
    cell = _TAG_OPEN.sub("&lt;", _ENTITY.sub("&amp;", str(text)))
    return cell.replace("|", "\\|").replace("\n", " ")


def md_row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"


__all__ = ["DASH", "DIGITS", "absent", "fmt_p", "md_cell", "md_row", "pct", "rounded",
           "significant"]
