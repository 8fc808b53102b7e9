"""The two statistics of the project: one seeded bootstrap of ratio metrics, one exact McNemar.

The score stage bootstraps each metric's interval, compare the interval of a paired delta;
both are "a ratio of per-item sums over items resampled with replacement", so one routine
serves both and the same seed gives the same resamples in either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

import numpy as np

# (numerator, denominator) per item; the statistic is sum(num) / sum(den) over a resample.
Ratio = tuple[np.ndarray, np.ndarray]
Interval = dict[str, float]


def bootstrap(ratios: Mapping[str, Ratio], samples: int, seed: int, confidence: float
              ) -> dict[str, Interval | None]:
    """Percentile interval of each sum(num)/sum(den) over items resampled with replacement.

    One index draw serves every ratio, so intervals of metrics over the same items are
    consistent, and a paired delta (num = per-item B - A) is resampled jointly for A and B.
    A resample whose denominator is 0 (a subgroup it missed) says nothing and is dropped; a
    ratio left without resamples, or no items or samples at all, has no interval (None).
    """
    n = len(next(iter(ratios.values()))[1]) if ratios else 0
    if n == 0 or samples <= 0:
        return dict.fromkeys(ratios)
    if any(len(num) != n or len(den) != n for num, den in ratios.values()):
        raise ValueError("every ratio must have one numerator and denominator per item")
    idx = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    alpha = (1 - confidence) / 2
    out: dict[str, Interval | None] = {}
    for name, (num, den) in ratios.items():
        den_s = den[idx].sum(axis=1)
        keep = den_s > 0
        if not keep.any():
            out[name] = None
            continue
        stats = num[idx].sum(axis=1)[keep] / den_s[keep]
        low, high = np.quantile(stats, [alpha, 1 - alpha])
        out[name] = {"low": round(float(low), 6), "high": round(float(high), 6)}
    return out


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar: under H0 each of the b + c discordant pairs goes either way with
    probability 1/2, so p = 2 * P(X <= min(b, c)), X ~ Binomial(b + c, 1/2), capped at 1.
    Exact rational arithmetic: tiny p-values do not underflow to 0."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


__all__ = ["Interval", "Ratio", "bootstrap", "mcnemar_exact"]
