"""Proportions: Wilson's interval of one, and for two independent ones (disjoint items of one
run: the "unseen" subset against the "seen" rest) Newcombe's interval of their difference and
Fisher's exact test.

A proportion (RIMO-N accuracy, RIMO-P strict, pass@k, maj@k, accuracy of one domain: k successes
out of n independent items) gets a Wilson score interval, which stays honest at 0/n and n/n,
where a percentile bootstrap collapses to [0, 0] or [1, 1].
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from rimo_eval.artifacts.numbers import rounded


def wilson(successes: int, n: int, confidence: float) -> dict[str, float | None]:
    """Wilson score interval of a binomial proportion, rounded like every metric (6 digits).

    Chosen over Clopper-Pearson because its coverage is close to the nominal level on average
    (Brown, Cai & DasGupta 2001), where Clopper-Pearson's guaranteed coverage makes it wider
    than needed; both stay inside [0, 1] and are not degenerate at 0/n or n/n. No items (n = 0)
    give no interval: nulls.
    """
    bounds = wilson_bounds(successes, n, confidence)
    if bounds is None:
        return {"low": None, "high": None}
    low, high = bounds
    return {"low": round(low, 6), "high": round(high, 6)}


def wilson_bounds(successes: float, n: float, confidence: float) -> tuple[float, float] | None:
    """:func:`wilson`'s bounds unrounded (None when n is 0), for intervals built from it
    (Newcombe's; the interval of a mean of fractions, rimo_eval.stats.means)."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson: need 0 <= successes <= n, got {successes}/{n}")
    if not 0 < confidence < 1:
        raise ValueError(f"wilson: confidence must be in (0, 1), got {confidence}")
    if n == 0:
        return None
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p, z2 = successes / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # Exactly 0 (1) at 0/n (n/n), not a rounding error away from it.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def proportion(values: np.ndarray, confidence: float) -> dict[str, float | None] | None:
    """Wilson interval of per-item 0/1 outcomes; None when a value is not 0 or 1 (a mean over
    samples, say): such a metric is not a binomial proportion and keeps the bootstrap."""
    v = np.asarray(values, dtype=float)
    if not np.isin(v, (0.0, 1.0)).all():
        return None
    return wilson(int(v.sum()), len(v), confidence)


def ratio(num: float, den: float) -> float | None:
    """A rate as the artifacts store it; None for an empty denominator."""
    return rounded(num / den) if den else None


def newcombe(right_a: int, n_a: int, right_b: int, n_b: int, confidence: float
             ) -> tuple[float, float] | None:
    """Interval of p_a - p_b of two independent proportions (Newcombe 1998, method 10, the
    hybrid score interval), built from the two Wilson intervals the project already reports, so
    it agrees with them; None if a side is empty."""
    wa, wb = wilson_bounds(right_a, n_a, confidence), wilson_bounds(right_b, n_b, confidence)
    if wa is None or wb is None:
        return None
    pa, pb = right_a / n_a, right_b / n_b
    d = pa - pb
    low = d - math.sqrt((pa - wa[0]) ** 2 + (wb[1] - pb) ** 2)
    high = d + math.sqrt((wa[1] - pa) ** 2 + (pb - wb[0]) ** 2)
    return max(-1.0, low), min(1.0, high)


def fisher_p(right_a: int, n_a: int, right_b: int, n_b: int) -> float | None:
    """Two-sided p-value of Fisher's exact test on the 2x2 table right/wrong x a/b (exact: no
    large-sample approximation for a subset of a few dozen items); None if a side is empty."""
    if n_a == 0 or n_b == 0:
        return None
    # Here, not at the top: scipy.stats takes a second or more to import, and every process
    # that scores, audits, compares or views imports this module, most with no cutoff set.
    from scipy.stats import fisher_exact

    table = [[right_a, n_a - right_a], [right_b, n_b - right_b]]
    return float(fisher_exact(table, alternative="two-sided").pvalue)


__all__ = ["fisher_p", "newcombe", "proportion", "ratio", "wilson", "wilson_bounds"]
