"""Two independent proportions (disjoint items of one run): Newcombe's interval of their
difference and Fisher's exact test.

Used for the "unseen" subset against the "seen" one (rimo_eval.score.years): the two subsets are
different items, so the paired tools of compare (bootstrap over shared items, McNemar) do not
apply. Newcombe's hybrid score interval (1998, method 10) is built from the two Wilson intervals
the project already reports, so it agrees with them; Fisher's exact test gives the p-value
(exact: no large-sample approximation for a subset of a few dozen items).
"""

from __future__ import annotations

import math

from rimo_eval.artifacts.numbers import rounded, significant
from rimo_eval.core.statistics import wilson_bounds


def newcombe(right_a: int, n_a: int, right_b: int, n_b: int, confidence: float
             ) -> tuple[float, float] | None:
    """Interval of p_a - p_b (Newcombe 1998, the hybrid score method); None if a side is
    empty."""
    wa, wb = wilson_bounds(right_a, n_a, confidence), wilson_bounds(right_b, n_b, confidence)
    if wa is None or wb is None:
        return None
    pa, pb = right_a / n_a, right_b / n_b
    d = pa - pb
    low = d - math.sqrt((pa - wa[0]) ** 2 + (wb[1] - pb) ** 2)
    high = d + math.sqrt((wa[1] - pa) ** 2 + (pb - wb[0]) ** 2)
    return max(-1.0, low), min(1.0, high)


def fisher_p(right_a: int, n_a: int, right_b: int, n_b: int) -> float | None:
    """Two-sided p-value of Fisher's exact test on the 2x2 table right/wrong x a/b."""
    if n_a == 0 or n_b == 0:
        return None
    # Here, not at the top: scipy.stats takes a second or more to import, and every process
    # that scores, audits, compares or views imports this module, most with no cutoff set.
    from scipy.stats import fisher_exact

    table = [[right_a, n_a - right_a], [right_b, n_b - right_b]]
    return float(fisher_exact(table, alternative="two-sided").pvalue)


def difference(right_a: int, n_a: int, right_b: int, n_b: int, confidence: float
               ) -> dict[str, float | None]:
    """p_a - p_b with its Newcombe interval and Fisher's p (rounded as every metric)."""
    ci = newcombe(right_a, n_a, right_b, n_b, confidence)
    d = right_a / n_a - right_b / n_b if n_a and n_b else None
    return {"difference": rounded(d),
            "difference_ci_low": rounded(ci[0]) if ci else None,
            "difference_ci_high": rounded(ci[1]) if ci else None,
            "fisher_p": significant(fisher_p(right_a, n_a, right_b, n_b))}


__all__ = ["difference", "fisher_p", "newcombe"]
