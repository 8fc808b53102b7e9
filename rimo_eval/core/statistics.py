"""The statistics of the project: Wilson intervals for proportions, one seeded bootstrap of
ratio metrics, one exact McNemar.

A proportion (RIMO-N accuracy, RIMO-P strict, pass@k, maj@k, accuracy of one domain: k successes
out of n independent items) gets a Wilson score interval, which stays honest at 0/n and n/n,
where a percentile bootstrap collapses to [0, 0] or [1, 1]. Everything that is not a count of
0/1 outcomes (prefix score, sub-problem accuracy, means over k samples) and every paired delta
keeps the seeded bootstrap: "a ratio of per-item sums over items resampled with replacement",
one routine for the score stage and compare, so the same seed gives the same resamples in either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np

from rimo_eval.artifacts.numbers import rounded
from rimo_eval.core.config import BootstrapParams, ScoreParams, coerce

# (numerator, denominator) per item; the statistic is sum(num) / sum(den) over a resample.
Ratio = tuple[np.ndarray, np.ndarray]
# {"low", "high"}; null bounds where there is none (wilson of no items).
Interval = dict[str, float | None]


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


def wilson_bounds(successes: int, n: int, confidence: float) -> tuple[float, float] | None:
    """:func:`wilson`'s bounds unrounded (None when n is 0), for intervals built from it
    (Newcombe's interval of a difference, rimo_eval.score.two_proportions)."""
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


def ratio(num: float, den: float) -> float | None:
    """A rate as the artifacts store it; None for an empty denominator."""
    return rounded(num / den) if den else None


def bootstrap_params(cfg: ScoreParams | Mapping[str, Any] | None) -> dict[str, Any]:
    """``score.bootstrap`` with its defaults (``core.config.BootstrapParams``, the one place
    they live), as plain data: what the intervals are computed with."""
    boot = cfg.bootstrap if isinstance(cfg, ScoreParams) else coerce(
        BootstrapParams, (cfg or {}).get("bootstrap"), "score.bootstrap")
    return boot.model_dump()


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


__all__ = ["Interval", "Ratio", "bootstrap", "bootstrap_params", "mcnemar_exact", "proportion",
           "ratio", "wilson", "wilson_bounds"]
