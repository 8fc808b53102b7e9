"""rimo_eval.core.statistics: the one bootstrap (score's intervals, compare's paired deltas) and
the exact McNemar, checked against hand counts, brute force and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from rimo_eval.core.statistics import bootstrap, mcnemar_exact

# --- exact McNemar -----------------------------------------------------------------------------


def test_mcnemar_matches_hand_computed_binomial_tails() -> None:
    # p = 2 * P(X <= min(b, c)) for X ~ Bin(b + c, 1/2), capped at 1.
    assert mcnemar_exact(5, 3) == 2 * (1 + 8 + 28 + 56) / 2**8
    assert mcnemar_exact(3, 5) == mcnemar_exact(5, 3)
    assert mcnemar_exact(10, 0) == 2 / 2**10
    assert mcnemar_exact(12, 1) == 2 * (1 + 13) / 2**13
    assert mcnemar_exact(1, 1) == 1.0  # 2 * 3/4 capped
    assert mcnemar_exact(0, 0) == 1.0  # no discordant pairs: no evidence
    assert mcnemar_exact(0, 1) == 1.0


@pytest.mark.parametrize("b,c", [(0, 1), (1, 0), (5, 3), (7, 2), (20, 9), (0, 6), (15, 15),
                                 (1, 30), (11, 2), (60, 41), (133, 97), (250, 1)])
def test_mcnemar_agrees_with_scipy_binomtest(b: int, c: int) -> None:
    # The exact McNemar is the two-sided binomial test of b successes in b + c at p = 1/2.
    want = binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    assert mcnemar_exact(b, c) == pytest.approx(want, rel=1e-9, abs=0)


def test_mcnemar_equals_brute_force_enumeration() -> None:
    # Independent definition: total probability of outcomes no more likely than the observed one.
    for b, c in [(7, 2), (20, 9), (0, 6), (15, 15), (1, 30)]:
        n = b + c
        pmf = [math.comb(n, k) / 2**n for k in range(n + 1)]
        want = min(1.0, sum(q for q in pmf if q <= pmf[b] * (1 + 1e-12)))
        assert mcnemar_exact(b, c) == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_mcnemar_is_exact_for_large_counts() -> None:
    # 2 / 2**400 underflows nothing and is not rounded to 0 by a float binomial sum.
    assert mcnemar_exact(400, 0) == 2.0**-399


# --- the bootstrap -----------------------------------------------------------------------------


def ones(n: int) -> np.ndarray:
    return np.ones(n)


def test_bootstrap_of_a_rate_is_seeded_and_sane() -> None:
    x = np.array([1.0] * 30 + [0.0] * 70)
    a = bootstrap({"r": (x, ones(100))}, samples=500, seed=3, confidence=0.95)["r"]
    assert a == bootstrap({"r": (x, ones(100))}, samples=500, seed=3, confidence=0.95)["r"]
    assert a != bootstrap({"r": (x, ones(100))}, samples=500, seed=4, confidence=0.95)["r"]
    assert a is not None and a["low"] < 0.3 < a["high"]
    # The normal-approximation half-width is 1.96 * sqrt(.3 * .7 / 100) = 0.0898.
    assert a["high"] - a["low"] == pytest.approx(2 * 0.0898, abs=0.03)
    assert bootstrap({"r": (ones(5), ones(5))}, 100, 0, 0.95) == {"r": {"low": 1.0, "high": 1.0}}
    assert bootstrap({"r": (np.array([]), np.array([]))}, 100, 0, 0.95) == {"r": None}
    assert bootstrap({"r": (ones(5), ones(5))}, 0, 0, 0.95) == {"r": None}
    with pytest.raises(ValueError):
        bootstrap({"r": (ones(5), ones(4))}, 10, 0, 0.95)


def test_one_draw_serves_every_ratio() -> None:
    # Two metrics in one call see the same resamples: what makes compare's deltas paired and
    # score's intervals consistent. Same seed alone or together gives the same interval.
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2, 50).astype(float)
    y = rng.integers(0, 2, 50).astype(float)
    both = bootstrap({"x": (x, ones(50)), "y": (y, ones(50))}, 300, 9, 0.9)
    assert both["x"] == bootstrap({"x": (x, ones(50))}, 300, 9, 0.9)["x"]
    assert both["y"] == bootstrap({"y": (y, ones(50))}, 300, 9, 0.9)["y"]


def test_paired_delta_interval() -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(0, 2, 200).astype(float)
    b = a.copy()
    b[:20] = 1.0 - b[:20]  # 20 flips out of 200
    ci = bootstrap({"acc": (b - a, ones(200)), "same": (a - a, ones(200))}, 500, 3, 0.95)
    # Identical sides: every resample gives delta 0, which an unpaired bootstrap would not.
    assert ci["same"] == {"low": 0.0, "high": 0.0}
    point = (b.sum() - a.sum()) / 200
    acc = ci["acc"]
    assert acc is not None and acc["low"] <= point <= acc["high"]
    # Paired: the interval only reflects the 20 discordant items, far narrower than +-0.1.
    assert acc["high"] - acc["low"] < 0.12


def test_ratio_of_sums_and_empty_subgroups() -> None:
    # A ratio of sums (sub-problem accuracy): 1/2 -> 2/2 on one item with 2 parts: delta 1/2.
    assert bootstrap({"r": (np.array([1.0]), np.array([2.0]))}, 50, 0, 0.95) == \
        {"r": {"low": 0.5, "high": 0.5}}
    # A subgroup absent from every resample (mask all zero) has no interval, not a crash.
    assert bootstrap({"g": (np.zeros(2), np.zeros(2))}, 50, 0, 0.95) == {"g": None}
    # A subgroup of 1 item in 20 is missed by some resamples: those are dropped, not 0/0.
    mask = np.zeros(20)
    mask[0] = 1.0
    assert bootstrap({"g": (mask, mask)}, 200, 0, 0.95) == {"g": {"low": 1.0, "high": 1.0}}
