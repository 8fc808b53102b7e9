"""Accuracy by competition year: a contamination lens, descriptive only (docs/accuracy_by_year.md).

An item's year is the first four characters of its id (``2023a1``: 2023), its shortlist label
the letter and number after it where the letter names a shortlist domain (``A1``; ``p`` ids,
the competition's own problem numbers, have none). Bands are fixed, so runs and branches line
up. Every number here is on sample 0 and per item, as the primary metrics are: RIMO-N accuracy
(a missing prediction is wrong), RIMO-P strict over gradable items (all parts right), so a band
is a subset of the items behind the headline and its interval is Wilson's, as by_domain's.

With ``score.training_cutoff`` (a date, ``2024-06``) the items of competitions held after it
form the "unseen" subset. The competition's year stands for its date: an item is unseen iff its
year is later than the cutoff's year, so the cutoff's own year counts as seen (its IMO may or may
not precede the cutoff; it is not claimed as unseen).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.artifacts.numbers import rounded, significant
from rimo_eval.params.cutoff import cutoff_text, cutoff_year
from rimo_eval.rimo.tracks import TRACK_P
from rimo_eval.rimo.years import (
    BAND_LABELS,
    LATER_BAND,
    OUTCOME,
    band_of,
    ordered_bands,
    shortlist_of,
    year_of,
)
from rimo_eval.stats import fisher_p, newcombe, wilson


def cell(right: int, n: int, name: str, confidence: float) -> dict[str, Any]:
    """One subset of items (a year band, an answer type): n, right, the rate, its Wilson
    interval."""
    ci = wilson(right, n, confidence)
    return {"n": n, "right": right, name: rounded(right / n) if n else None,
            f"{name}_ci_low": ci["low"], f"{name}_ci_high": ci["high"]}


def outcomes(first: pd.DataFrame, track: str) -> tuple[np.ndarray, np.ndarray]:
    """(years, 0/1 outcome) per item of sample 0's rows: RIMO-P over gradable items only."""
    if track == TRACK_P:
        first = first[first["gradable"].astype(bool)]
        values = first["strict"]
    else:
        values = first["correct"]
    years = np.array([year_of(p) for p in first["problem_id"]], dtype=object)
    dated = years != None  # noqa: E711 (elementwise)
    return years[dated].astype(int), values.to_numpy(dtype=bool)[dated]


def by_year_band(years: np.ndarray, right: np.ndarray, name: str, confidence: float
                 ) -> dict[str, dict[str, Any]]:
    """Each fixed band (empty ones too, n 0, so every run has the same columns)."""
    bands = np.array([band_of(int(y)) for y in years], dtype=object)
    out = {}
    for label in BAND_LABELS:
        mask = bands == label
        if label == LATER_BAND and not mask.any():
            continue
        out[label] = cell(int(right[mask].sum()), int(mask.sum()), name, confidence)
    return out


def difference(right_a: int, n_a: int, right_b: int, n_b: int, confidence: float
               ) -> dict[str, float | None]:
    """p_a - p_b of two disjoint subsets with Newcombe's interval and Fisher's p (rounded as
    every metric): the subsets are different items, so compare's paired tests do not apply."""
    ci = newcombe(right_a, n_a, right_b, n_b, confidence)
    d = right_a / n_a - right_b / n_b if n_a and n_b else None
    return {"difference": rounded(d),
            "difference_ci_low": rounded(ci[0]) if ci else None,
            "difference_ci_high": rounded(ci[1]) if ci else None,
            "fisher_p": significant(fisher_p(right_a, n_a, right_b, n_b))}


def unseen_block(years: np.ndarray, right: np.ndarray, name: str, cutoff: Any,
                 confidence: float) -> dict[str, Any]:
    """The unseen subset (year > the cutoff's year) against the seen rest of the same run."""
    after = years > cutoff_year(cutoff)
    ua, un = int(right[after].sum()), int(after.sum())
    sa, sn = int(right[~after].sum()), int((~after).sum())
    return {"cutoff": cutoff_text(cutoff), "rule": "year > cutoff year",
            "unseen": cell(ua, un, name, confidence), "seen": cell(sa, sn, name, confidence),
            **difference(ua, un, sa, sn, confidence)}


def year_blocks(first: pd.DataFrame, track: str, confidence: float, cutoff: Any = None
                ) -> dict[str, Any]:
    """The ``by_year_band`` (and, with a cutoff, ``unseen``) blocks of one track."""
    years, right = outcomes(first, track)
    name = OUTCOME[track]
    blocks: dict[str, Any] = {"by_year_band": by_year_band(years, right, name, confidence)}
    if cutoff is not None:
        blocks["unseen"] = unseen_block(years, right, name, cutoff, confidence)
    return blocks


def band_rows(blocks: Mapping[str, Any] | None, name: str) -> list[dict[str, Any]]:
    """Plot rows (band, value, interval, n) of the bands that hold items, in year order."""
    return [{"band": label, name: c.get(name), f"{name}_ci_low": c.get(f"{name}_ci_low"),
             f"{name}_ci_high": c.get(f"{name}_ci_high"), "n": c.get("n")}
            for label, c in ordered_bands(blocks) if c.get("n")]


def year_columns(problem_id: str) -> dict[str, Any]:
    """The score table's ``year`` and ``shortlist`` of one item."""
    return {"year": year_of(problem_id), "shortlist": shortlist_of(problem_id)}


__all__ = ["band_rows", "by_year_band", "cell", "difference", "outcomes", "unseen_block",
           "year_blocks", "year_columns"]
