"""Wilson intervals for proportions (rimo_eval.core.statistics.wilson) against the closed form
worked by hand and scipy's independent implementation, and where the score stage uses them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from rimo_eval.core.statistics import bootstrap, proportion, wilson
from rimo_eval.score.metrics import single_interval


def closed_form(k: int, n: int, z: float) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


Z95 = 1.959963984540054


def test_wilson_known_values_at_the_extremes_and_the_middle() -> None:
    # 0/5: [0, z^2 / (n + z^2)]; 5/5 its mirror; 1/2 symmetric around 1/2.
    assert wilson(0, 5, 0.95) == {"low": 0.0, "high": round(Z95**2 / (5 + Z95**2), 6)}
    assert wilson(0, 5, 0.95) == {"low": 0.0, "high": 0.434482}
    assert wilson(5, 5, 0.95) == {"low": 0.565518, "high": 1.0}
    assert wilson(1, 2, 0.95) == {"low": 0.094531, "high": 0.905469}
    assert wilson(0, 0, 0.95) == {"low": None, "high": None}  # no items, no interval


@pytest.mark.parametrize("k,n", [(0, 5), (5, 5), (1, 2), (3, 10), (156, 335), (1, 456),
                                 (455, 456), (0, 1), (17, 40)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_agrees_with_closed_form_and_scipy(k: int, n: int, confidence: float) -> None:
    z = {0.9: 1.6448536269514722, 0.95: Z95, 0.99: 2.5758293035489004}[confidence]
    got = wilson(k, n, confidence)
    low, high = closed_form(k, n, z)
    ref = binomtest(k, n).proportion_ci(confidence, method="wilson")
    assert got["low"] == pytest.approx(max(low, 0.0), abs=1e-6)
    assert got["high"] == pytest.approx(min(high, 1.0), abs=1e-6)
    assert got["low"] == pytest.approx(ref.low, abs=1e-6)
    assert got["high"] == pytest.approx(ref.high, abs=1e-6)
    assert got["low"] <= k / n <= got["high"]


def test_wilson_refuses_impossible_counts() -> None:
    for k, n in ((3, 2), (-1, 4)):
        with pytest.raises(ValueError, match="successes"):
            wilson(k, n, 0.95)
    with pytest.raises(ValueError, match="confidence"):
        wilson(1, 2, 1.0)


def test_the_bootstrap_collapses_where_wilson_does_not() -> None:
    """The bug this replaces: 0/5 right was shown as [0%, 0%], the oracle as [100%, 100%]."""
    ones = np.ones(5)
    for outcomes in (np.zeros(5), ones):
        boot = bootstrap({"m": (outcomes, ones)}, 1000, 0, 0.95)["m"]
        assert boot["low"] == boot["high"]
        honest = proportion(outcomes, 0.95)
        assert honest is not None and honest["high"] - honest["low"] > 0.4


def test_proportion_only_for_zero_one_outcomes() -> None:
    assert proportion(np.array([1.0, 0.0, 1.0]), 0.95) == wilson(2, 3, 0.95)
    assert proportion(np.array([0.5, 1.0]), 0.95) is None  # a mean over samples


def test_single_interval_uses_wilson_for_pass_and_maj_and_bootstrap_for_means() -> None:
    ci = single_interval({"samples": 200, "seed": 0, "confidence": 0.95})
    assert ci(np.array([1.0, 1.0, 1.0, 1.0]), None) == wilson(4, 4, 0.95)
    means = np.array([0.25, 0.5, 0.75, 1.0])
    assert ci(means, None) == bootstrap({"m": (means, np.ones(4))}, 200, 0, 0.95)["m"]
