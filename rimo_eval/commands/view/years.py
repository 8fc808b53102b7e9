"""The view's year lens (docs/accuracy_by_year.md): each item's competition year,
year band and shortlist label, and the unseen subsets that the runs' training cutoffs define.

Years and bands come from rimo_eval.rimo.years, the functions the score stage writes its
``year`` column and its ``by_year_band`` blocks with, so a band the view filters holds exactly
the items breakdown.json counts in it (a run from before those columns gets them too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rimo_eval.params.cutoff import cutoff_year, known_cutoff
from rimo_eval.rimo.years import BAND_LABELS, LATER_BAND, band_of, shortlist_of, year_of
from rimo_eval.run.params import own_cutoff


def item_year(problem_id: str) -> dict[str, Any]:
    """``{"year", "band", "shortlist"}`` of one item (None where the id names none)."""
    year = year_of(problem_id)
    return {"year": year, "band": None if year is None else band_of(year),
            "shortlist": shortlist_of(problem_id)}


def bands(years: Iterable[int | None]) -> list[str]:
    """The filter's bands: the fixed ones (empty ones too, as breakdown.json lists them) and
    the later band only where an item is in it."""
    later = any(y is not None and band_of(y) == LATER_BAND for y in years)
    return [b for b in BAND_LABELS if b != LATER_BAND or later]


def unseen_options(labels: Sequence[str], cutoffs: Sequence[str | None]
                   ) -> list[dict[str, Any]]:
    """One "unseen" choice per distinct cutoff year (the rule of rimo_eval.score.years: an item
    is unseen iff its year is later than the cutoff's), naming the runs and cutoffs behind it."""
    by_year: dict[int, dict[str, Any]] = {}
    for label, cutoff in zip(labels, cutoffs, strict=True):
        if cutoff is None:
            continue
        year = cutoff_year(cutoff)
        assert year is not None
        entry = by_year.setdefault(year, {"value": f"unseen-{year}", "after": year,
                                          "runs": [], "cutoffs": []})
        entry["runs"].append(label)
        if cutoff not in entry["cutoffs"]:
            entry["cutoffs"].append(cutoff)
    return [by_year[y] for y in sorted(by_year)]


def run_cutoffs(labels: Sequence[str], params: Sequence[Mapping[str, Any]],
                cutoffs: Mapping[str, str]) -> list[str | None]:
    """Each run's cutoff: ``--cutoff RUN=DATE``, else its own ``score.training_cutoff``."""
    return [known_cutoff((label,), own_cutoff(p), cutoffs)
            for label, p in zip(labels, params, strict=True)]


__all__ = ["bands", "item_year", "run_cutoffs", "unseen_options"]
