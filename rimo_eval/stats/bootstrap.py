"""The seeded bootstrap over items: one index draw, percentile intervals of ratios of per-item
sums, and the paired p-value.

Everything that is not a count of 0/1 outcomes (means over k samples, paired deltas, rank
ranges) uses "a ratio of per-item sums over items resampled with replacement". The draw is one
function, so the same seed gives the same resamples in score, the judge, compare and the
leaderboard, and compare's and the leaderboard's p-values are the same computation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rimo_eval.params.config import BootstrapParams, ScoreParams

# (numerator, denominator) per item; the statistic is sum(num) / sum(den) over a resample.
Ratio = tuple[np.ndarray, np.ndarray]
# {"low", "high"}; null bounds where there is none (wilson of no items).
Interval = dict[str, float | None]


def draw(n: int, samples: int, seed: int) -> np.ndarray:
    """The resampled item indices, samples x n (none, shape (0, n), without items or samples)."""
    if n <= 0 or samples <= 0:
        return np.zeros((0, max(n, 0)), dtype=np.int64)
    return np.random.default_rng(seed).integers(0, n, size=(samples, n))


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
    idx = draw(n, samples, seed)
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


def bootstrap_p(diff: np.ndarray, idx: np.ndarray) -> float:
    """Two-sided paired bootstrap p-value of mean(diff) = 0 (diff: per-item B - A) over the
    resamples ``idx`` (:func:`draw`): the share of resampled mean differences on either side of
    0 (the percentile interval's own duality), doubled, capped at 1, rounded to 6 digits; 1
    without items or resamples."""
    if len(diff) == 0 or len(idx) == 0:
        return 1.0
    deltas = diff[idx].mean(axis=1)
    return round(float(min(1.0, 2 * min((deltas <= 0).mean(), (deltas >= 0).mean()))), 6)


def bootstrap_params(cfg: ScoreParams | None) -> dict[str, Any]:
    """``score.bootstrap`` with its defaults (``params.config.BootstrapParams``, the one place
    they live; None: no score section), as plain data: what the intervals are computed with."""
    boot = cfg.bootstrap if cfg is not None else BootstrapParams()
    return boot.model_dump()


__all__ = ["Interval", "Ratio", "bootstrap", "bootstrap_p", "bootstrap_params", "draw"]
