"""The item audit over many runs: per item its solve rate, the commonest wrong answer, a 2PL
difficulty and discrimination with intervals, and flags (suspect_gold, never_solved,
always_solved, misfit).

Input is a :class:`Matrix`: the same items for every run, one outcome (and, on RIMO-N, one
extracted answer) per run and item, sample 0 of each run as for the headline metrics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rimo_eval.commands.items.gold import FDR, check_golds
from rimo_eval.commands.items.irt import fit_2pl
from rimo_eval.errors import DataError

MIN_RUNS = 3
# Outfit mean square above 2: the item's responses are noisier than the model allows, enough
# to distort the fit (Linacre's rule of thumb); or a discrimination surely below 0.
MISFIT_OUTFIT = 2.0


class ItemsError(DataError):
    """Runs the audit cannot take (too few, other items, a mix of k), said as what it needs."""


@dataclass(frozen=True)
class Matrix:
    runs: list[str]  # run labels
    tracks: list[str]  # per item
    problem_ids: list[str]
    gold: list[str | None]  # RIMO-N gold answers; None on RIMO-P
    correct: np.ndarray  # runs x items, bool
    answers: np.ndarray  # runs x items, object: RIMO-N extracted answer or None


def _rounded(x: float) -> float | None:
    return round(float(x), 4) if np.isfinite(x) else None


def audit(m: Matrix, rate: float = FDR) -> dict[str, Any]:
    """The audit as plain data (``items --json``)."""
    if len(m.runs) < MIN_RUNS:
        raise ItemsError(f"the item audit needs at least {MIN_RUNS} runs over the same items, "
                         f"got {len(m.runs)}")
    correct = m.correct.astype(bool)
    fit = fit_2pl(correct.astype(float))
    n_idx = [i for i, g in enumerate(m.gold) if g is not None]
    # A run's strength on the gold check: its RIMO-N accuracy (one item moves it by 1/335).
    sub = correct[:, n_idx]
    # By column: RIMO-N and RIMO-P ids may coincide.
    checks = dict(zip(n_idx, check_golds(
        [m.problem_ids[i] for i in n_idx], [str(m.gold[i]) for i in n_idx],
        m.answers[:, n_idx], sub, sub.mean(axis=1)), strict=True)) if n_idx else {}
    items: list[dict[str, Any]] = []
    for i, (track, pid) in enumerate(zip(m.tracks, m.problem_ids, strict=True)):
        solved = int(correct[:, i].sum())
        wrong = Counter(str(x) for x, ok in zip(m.answers[:, i], correct[:, i], strict=True)
                        if not ok and x is not None)
        common = min(wrong.items(), key=lambda kv: (-kv[1], kv[0])) if wrong else None
        row: dict[str, Any] = {
            "track": track, "problem_id": pid, "gold": m.gold[i],
            "solve_rate": round(solved / len(m.runs), 4), "solved_by": solved,
            "common_wrong": ({"answer": common[0], "runs": common[1]} if common else None)}
        if fit.converged:
            a_low, a_high = fit.interval("discrimination", i)
            b_low, b_high = fit.interval("difficulty", i)
            row["irt"] = {"difficulty": _rounded(fit.difficulty[i]),
                          "difficulty_ci": [_rounded(b_low), _rounded(b_high)],
                          "discrimination": _rounded(fit.discrimination[i]),
                          "discrimination_ci": [_rounded(a_low), _rounded(a_high)],
                          "outfit": _rounded(fit.outfit[i])}
        flags = []
        check = checks.get(i)
        if check is not None and check.suspect:
            flags.append("suspect_gold")
            row["suspect"] = {"answer": check.answer, "runs": check.runs,
                              "p_value": float(f"{check.p_value:.3g}")}
        if solved == 0:
            flags.append("never_solved")
        elif solved == len(m.runs):
            flags.append("always_solved")
        if fit.converged and 0 < solved < len(m.runs) and (
                fit.outfit[i] > MISFIT_OUTFIT or fit.interval("discrimination", i)[1] < 0):
            flags.append("misfit")
        row["flags"] = flags
        items.append(row)
    return {"runs": list(m.runs), "items": items,
            "irt": {"model": "2PL, marginal MAP (EM over 41 quadrature nodes)",
                    "converged": fit.converged, "iterations": fit.iterations},
            "suspect_gold": {"false_discovery_rate": rate,
                             "items": [r["problem_id"] for r in items
                                       if "suspect_gold" in r["flags"]]}}


# The rule a suggested erratum names: validate has no such finding, so the entry cannot be
# applied as it stands (errata.unused would fail the stage). A person who confirms the gold
# moves it into data/errata.yaml with the covers and id the correction needs.
SUSPECT_RULE = "gold.suspect"


def suggested_errata(result: dict[str, Any], sources: Sequence[str]) -> dict[str, Any]:
    """data/errata.yaml's shape (its schema) for the suspect golds: for a person to check,
    never applied. Ids from E901, out of the way of the file's own."""
    entries = []
    for n, row in enumerate((r for r in result["items"] if "suspect_gold" in r["flags"]), 901):
        s = row["suspect"]
        entries.append({
            "id": f"E{n}", "track": row["track"], "problem_id": row["problem_id"],
            "covers": [SUSPECT_RULE], "action": "set", "field": "answer", "value": s["answer"],
            "reason": (f"SUGGESTED, unchecked: {s['runs']} of {len(result['runs'])} runs "
                       f"answered {s['answer']} where the gold is {row['gold']} (p = "
                       f"{s['p_value']}, Benjamini-Hochberg at "
                       f"{result['suspect_gold']['false_discovery_rate']})."),
            "evidence": f"rimo-eval items over: {', '.join(sources)}"})
    return {"version": 1, "errata": entries}


__all__ = ["MIN_RUNS", "SUSPECT_RULE", "ItemsError", "Matrix", "audit", "suggested_errata"]
