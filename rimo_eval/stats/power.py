"""Power of the paired comparison of two runs' RIMO-N accuracy, as ``rimo-eval compare`` tests
it: the exact McNemar on the discordant items at k = 1, the paired bootstrap of per-item means
over k samples at k > 1.

Assumptions (docs/statistics.md, "Planning a run"):

- ``discordance`` (psi): the share of items (at k > 1: of sample pairs) that one run answers
  right and the other wrong. The difference delta = p_B - p_A is the share won minus the share
  lost, so |delta| <= psi. With psi known, the power does not depend on the accuracy level.
- At k > 1, ``rho``: the correlation of one item's per-sample differences (0: samples as
  independent as other items; 1: every sample of an item the same). An item's mean difference
  then has variance (psi - delta^2)(1 + (k - 1) rho) / k, and the test is taken as its normal
  approximation (compare's bootstrap p-value approximates the same two-sided test).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

POWER = 0.8
ALPHA = 0.05


def _check(n: int, psi: float, alpha: float, power: float) -> None:
    if n < 1:
        raise ValueError(f"power: need at least one item, got {n}")
    if not 0 < psi <= 1:
        raise ValueError(f"power: discordance must be in (0, 1], got {psi}")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"power: alpha and power must be in (0, 1), got {alpha}, {power}")


def mcnemar_power(n: int, psi: float, delta: float, alpha: float = ALPHA) -> float:
    """Exact power of the two-sided exact McNemar at level ``alpha`` (rimo_eval.stats.paired:
    p = 2 P(X <= min(b, c)), X ~ Bin(b + c, 1/2)), n items, discordance psi, difference delta:
    the discordant count D ~ Bin(n, psi), the wins among them ~ Bin(D, (psi + delta) / 2psi)."""
    from scipy.stats import binom  # here: scipy.stats is slow to import (test_lazy_imports)

    _check(n, psi, alpha, 0.5)
    if abs(delta) > psi:
        raise ValueError(f"power: |delta| {abs(delta)} exceeds the discordance {psi}")
    d = np.arange(n + 1)
    # The largest t with 2 P(X <= t) <= alpha under H0, per D (-1: no rejection possible).
    t = binom.ppf(alpha / 2, d, 0.5).astype(int)
    t = np.where(2 * binom.cdf(t, d, 0.5) <= alpha, t, t - 1)
    q = (psi + delta) / (2 * psi)
    reject = np.where(t >= 0, binom.cdf(t, d, q) + binom.sf(d - t - 1, d, q), 0.0)
    # Both tails count once: they overlap only where t >= d / 2, which alpha < 1 rules out.
    return float(np.sum(binom.pmf(d, n, psi) * reject))


def mean_power(n: int, k: int, psi: float, rho: float, delta: float, alpha: float = ALPHA
               ) -> float:
    """Normal-approximation power of the paired test of per-item means over k samples."""
    _check(n, psi, alpha, 0.5)
    z = NormalDist()
    se = math.sqrt(max(psi - delta * delta, 1e-12) * (1 + (k - 1) * rho) / k / n)
    crit = z.inv_cdf(1 - alpha / 2)
    return z.cdf(abs(delta) / se - crit) + z.cdf(-abs(delta) / se - crit)


def power(n: int, k: int, psi: float, rho: float, delta: float, alpha: float = ALPHA) -> float:
    """The power of compare's test at this k (exact McNemar at k = 1)."""
    if k < 1:
        raise ValueError(f"power: k must be >= 1, got {k}")
    return (mcnemar_power(n, psi, delta, alpha) if k == 1
            else mean_power(n, k, psi, rho, delta, alpha))


def min_detectable(n: int, k: int, psi: float, rho: float = 0.5, alpha: float = ALPHA,
                   target: float = POWER) -> float | None:
    """The smallest delta (to 1e-4) detected with power ``target``; None when even delta = psi
    (every discordant item won) is not."""
    _check(n, psi, alpha, target)
    if power(n, k, psi, rho, psi, alpha) < target:
        return None
    # Bisection: the exact power grows with delta (up to the test's discreteness).
    low, high = 0.0, psi
    while high - low > 1e-4:
        mid = (low + high) / 2
        if power(n, k, psi, rho, mid, alpha) >= target:
            high = mid
        else:
            low = mid
    return round(high, 4)


def items_needed(delta: float, k: int, psi: float, rho: float = 0.5, alpha: float = ALPHA,
                 target: float = POWER, most: int = 1_000_000) -> int | None:
    """The fewest items that detect ``delta`` with power ``target`` (None: more than ``most``),
    by bisection from the normal approximation's count (the exact power at k = 1 wobbles with
    n by the test's discreteness: this is the first n of the bisection, not of every n)."""
    if delta == 0:
        return None
    z = NormalDist()
    var = max(psi - delta * delta, 1e-12) * (1 + (k - 1) * rho) / k
    guess = math.ceil((z.inv_cdf(1 - alpha / 2) + z.inv_cdf(target)) ** 2 * var / delta ** 2)
    high = min(most, 2 * guess + 50)
    if power(high, k, psi, rho, delta, alpha) < target:
        return None
    low = max(0, guess // 2)
    if low and power(low, k, psi, rho, delta, alpha) >= target:
        low = 0
    while high - low > 1:
        mid = (low + high) // 2
        if power(mid, k, psi, rho, delta, alpha) >= target:
            high = mid
        else:
            low = mid
    return high


def samples_needed(delta: float, n: int, psi: float, rho: float = 0.5, alpha: float = ALPHA,
                   target: float = POWER, most: int = 1024) -> int | None:
    """The fewest samples per item (k) that detect ``delta`` on n items (None: none up to
    ``most``; more samples cannot beat the items' own spread when rho > 0)."""
    for k in range(1, most + 1):
        if power(n, k, psi, rho, delta, alpha) >= target:
            return k
    return None


__all__ = ["ALPHA", "POWER", "items_needed", "mcnemar_power", "mean_power", "min_detectable",
           "power", "samples_needed"]
