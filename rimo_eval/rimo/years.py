"""Competition years of RIMO items and the fixed year bands (docs/accuracy_by_year.md): read
from the id, so every stage and tool that shows years agrees. An item's year is the
first four characters of its id (``2023a1``: 2023), its shortlist label the letter and number
after it where the letter names a shortlist domain (``A1``; ``p`` ids, the competition's own
problem numbers, have none)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

# (label, first year, last year); None: open. Fixed: the same columns for every run.
YEAR_BANDS: tuple[tuple[str, int | None, int | None], ...] = (
    ("<=1989", None, 1989), ("1990-2004", 1990, 2004), ("2005-2014", 2005, 2014),
    ("2015-2019", 2015, 2019), ("2020-2023", 2020, 2023))
LATER_BAND = ">=2024"  # only for items of a later release than the pinned data
BAND_LABELS = (*(b[0] for b in YEAR_BANDS), LATER_BAND)
# The per-item outcome each track's bands count, and its name in the blocks.
OUTCOME = {TRACK_N: "accuracy", TRACK_P: "strict"}
_YEAR = re.compile(r"^(\d{4})")
_SHORTLIST = re.compile(r"^\d{4}([acgn])(\d+)$")


def year_of(problem_id: str) -> int | None:
    """The id's first four characters as a year; None for an id that does not start with one
    (no RIMO item; a custom item set may have such ids): such items are in no band, neither
    seen nor unseen, and out of the trend, never an error."""
    found = _YEAR.match(str(problem_id))
    return int(found.group(1)) if found else None


def shortlist_of(problem_id: str) -> str | None:
    """``2023a1`` -> ``A1``; None for an id that names no shortlist problem (``2023p1``)."""
    found = _SHORTLIST.match(str(problem_id))
    return f"{found.group(1).upper()}{found.group(2)}" if found else None


def band_of(year: int) -> str:
    for label, first, last in YEAR_BANDS:
        if (first is None or year >= first) and (last is None or year <= last):
            return label
    if year > YEAR_BANDS[-1][2]:  # type: ignore[operator]
        return LATER_BAND
    raise ValueError(f"year {year} before every band")  # unreachable: the first is open


def ordered_bands(blocks: Mapping[str, Any] | None) -> list[tuple[str, Mapping[str, Any]]]:
    """A ``by_year_band`` block's bands in year order (breakdown.json stores keys sorted, which
    puts "<=1989" last)."""
    blocks = blocks or {}
    return [(label, blocks[label]) for label in BAND_LABELS if label in blocks]



__all__ = ["BAND_LABELS", "LATER_BAND", "OUTCOME", "YEAR_BANDS", "band_of", "ordered_bands",
           "shortlist_of", "year_of"]
