"""The interval of a mean of per-item fractions (RIMO-P prefix score, sub-problem accuracy,
mean@k, the judge's rates): Wilson's interval of the sum, over the items' effective number.

A percentile bootstrap collapses to a point when every value is the same (4 RIMO-P items all 0
printed ``prefix score 0.0% [0.0%, 0.0%]``) and under-covers at small n. Values in [0, 1] with
mean p have a variance of at most p(1 - p), the variance of a 0/1 outcome, so Wilson's score
interval of a proportion, applied to the sum of the fractions as if it were a count of
successes, is an honest (conservative) interval of their mean: it is Wilson's exactly when every
value is 0 or 1, is never a point, and stays inside [0, 1]. A ratio of sums with per-item
denominators (sub-problem accuracy: parts right over parts) weighs items unequally; its items
count as Kish's effective number (sum den)^2 / sum(den^2), which is the number of items when
the weights are equal. docs/statistics.md gives the simulated coverage.
"""

from __future__ import annotations

import numpy as np

from rimo_eval.stats.bootstrap import Interval
from rimo_eval.stats.proportions import wilson_bounds


def mean_interval(num: np.ndarray, den: np.ndarray | None, confidence: float) -> Interval:
    """Interval of sum(num) / sum(den) (den None: the mean of ``num``), each item's num/den in
    [0, 1]; rounded like every metric; nulls without items (or with every den 0)."""
    x = np.asarray(num, dtype=float)
    d = np.ones(len(x)) if den is None else np.asarray(den, dtype=float)
    if len(d) != len(x):
        raise ValueError("mean_interval: one numerator and denominator per item")
    total, squares = float(d.sum()), float((d * d).sum())
    if total <= 0:
        return {"low": None, "high": None}
    p = min(1.0, max(0.0, float(x.sum()) / total))
    n_eff = total * total / squares
    bounds = wilson_bounds(p * n_eff, n_eff, confidence)
    assert bounds is not None  # n_eff > 0
    return {"low": round(bounds[0], 6), "high": round(bounds[1], 6)}


__all__ = ["mean_interval"]
