"""rimo_eval.stats, the project's statistics in one place, against closed forms worked by hand,
brute force and independent implementations (scipy, statsmodels): Wilson, Newcombe, Fisher, the
seeded bootstrap (draw, intervals, paired p-value), the concordance counts, exact McNemar, Holm;
and where the score stage uses Wilson or the bootstrap."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.stats import binomtest, fisher_exact
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from rimo_eval.commands.compare.samples import mean_test
from rimo_eval.score.metrics import single_interval
from rimo_eval.stats import (
    bootstrap,
    bootstrap_p,
    concordance,
    draw,
    fisher_p,
    holm,
    mcnemar_exact,
    mean_interval,
    newcombe,
    proportion,
    wilson,
)

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


# --- Wilson ------------------------------------------------------------------------------------


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


def test_single_interval_uses_wilson_for_pass_and_maj_and_the_sum_for_means() -> None:
    ci = single_interval({"samples": 200, "seed": 0, "confidence": 0.95})
    assert ci(np.array([1.0, 1.0, 1.0, 1.0]), None) == wilson(4, 4, 0.95)
    means = np.array([0.25, 0.5, 0.75, 1.0])
    assert ci(means, None) == mean_interval(means, None, 0.95)


# --- the interval of a mean of fractions (issue 45 §3) -----------------------------------------


def test_mean_interval_is_wilson_of_the_sum() -> None:
    # 0/1 values: Wilson's interval exactly; fractions: Wilson's with the sum as the count
    # (statsmodels takes a non-integer count); never a point, even at 0 or 1 everywhere.
    for values in ([0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 1, 0]):
        x = np.array(values, dtype=float)
        assert mean_interval(x, None, 0.95) == wilson(int(x.sum()), len(x), 0.95)
    x = np.array([0.25, 0.5, 0.0, 1 / 3, 0.0, 0.75])
    low, high = proportion_confint(x.sum(), 6, alpha=0.05, method="wilson")
    assert mean_interval(x, None, 0.95) == pytest.approx({"low": low, "high": high}, abs=1e-6)
    assert mean_interval(np.zeros(4), None, 0.95) == {"low": 0.0, "high": 0.489891}
    # A ratio of sums (sub-problem accuracy) counts Kish's effective number of items.
    num, den = np.array([1.0, 0.0, 3.0]), np.array([1.0, 2.0, 4.0])
    n_eff = 7**2 / 21
    low, high = proportion_confint(4 / 7 * n_eff, n_eff, alpha=0.05, method="wilson")
    assert mean_interval(num, den, 0.95) == pytest.approx({"low": low, "high": high}, abs=1e-6)
    assert mean_interval(np.zeros(0), None, 0.95) == {"low": None, "high": None}
    assert mean_interval(np.zeros(2), np.zeros(2), 0.95) == {"low": None, "high": None}


def _zero_heavy_prefix(n: int, rng: np.random.Generator) -> tuple[np.ndarray, None]:
    # A weak model's prefix scores: 85% of items 0, the rest k/parts, parts 2-4.
    parts = rng.integers(2, 5, n)
    k = np.floor(rng.random(n) * parts) + 1
    return np.where(rng.random(n) < 0.85, 0.0, k / parts), None


def _high(n: int, rng: np.random.Generator) -> tuple[np.ndarray, None]:
    return 1.0 - _zero_heavy_prefix(n, rng)[0], None


def _rare_full(n: int, rng: np.random.Generator) -> tuple[np.ndarray, None]:
    return (rng.random(n) < 0.05).astype(float), None  # 0/1: Wilson's own coverage


def _nearly_all_zero(n: int, rng: np.random.Generator) -> tuple[np.ndarray, None]:
    return np.where(rng.random(n) < 0.02, 0.25, 0.0), None


def _mean_at_4(n: int, rng: np.random.Generator) -> tuple[np.ndarray, None]:
    return rng.binomial(4, rng.beta(0.3, 1.5, n)) / 4, None  # mean@k, k = 4, hard items


def _uniform(n: int, rng: np.random.Generator) -> tuple[np.ndarray, None]:
    return rng.random(n), None


def _sub_problems(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    # Parts right over parts, 1-4 parts, a fifth of the items mostly solved.
    parts = rng.integers(1, 5, n)
    p = np.where(rng.random(n) < 0.2, 0.8, 0.05)
    return rng.binomial(parts, p).astype(float), parts.astype(float)


POPULATIONS = [_zero_heavy_prefix, _high, _rare_full, _nearly_all_zero, _mean_at_4, _uniform,
               _sub_problems]


def _coverage(population: Any, n: int, method: str, reps: int, seed: int) -> float:
    big, big_den = population(1_000_000, np.random.default_rng(1234))
    true = big.sum() / (len(big) if big_den is None else big_den.sum())
    rng = np.random.default_rng(seed)
    hits = 0
    for rep in range(reps):
        num, den = population(n, rng)
        if method == "wilson-sum":
            ci = mean_interval(num, den, 0.95)
        else:
            ci = bootstrap({"m": (num, np.ones(n) if den is None else den)}, 500, rep,
                           0.95)["m"] or {"low": None, "high": None}
        hits += ci["low"] is not None and ci["low"] - 1e-6 <= true <= ci["high"] + 1e-6
    return hits / reps


@pytest.mark.parametrize("n", [4, 20, 100])
@pytest.mark.parametrize("population", POPULATIONS, ids=lambda f: f.__name__.strip("_"))
def test_mean_interval_covers_at_small_n(population: Any, n: int) -> None:
    """Simulated coverage of the 95% interval, fixed seed, 1000 samples of n items from each
    population: at least 0.92 (Wilson's own dips to about 0.92 on rare 0/1 outcomes;
    docs/statistics.md lists the figures)."""
    assert _coverage(population, n, "wilson-sum", 1000, seed=n) >= 0.92


def test_the_percentile_bootstrap_did_not_cover_at_small_n() -> None:
    # What the interval replaces: on a weak model's prefix scores at n = 4 the percentile
    # bootstrap covers the true mean well under half the time (a point when all are 0).
    assert _coverage(_zero_heavy_prefix, 4, "bootstrap", 300, seed=4) < 0.6

# --- Newcombe and Fisher (two independent proportions) ------------------------------------------


@pytest.mark.parametrize("a,na,b,nb", [(3, 20, 40, 100), (0, 12, 5, 30), (12, 12, 0, 7),
                                       (45, 90, 130, 245)])
def test_newcombe_agrees_with_statsmodels_and_fisher_with_scipy(a: int, na: int, b: int,
                                                                  nb: int) -> None:
    low, high = newcombe(a, na, b, nb, 0.95) or (None, None)
    ref = confint_proportions_2indep(a, na, b, nb, method="newcomb", compare="diff")
    assert (low, high) == pytest.approx(ref, abs=1e-9)
    assert fisher_p(a, na, b, nb) == pytest.approx(fisher_exact([[a, na - a], [b, nb - b]]
                                                                ).pvalue, rel=1e-12)
    assert newcombe(0, 0, b, nb, 0.95) is None and fisher_p(a, na, 0, 0) is None


# --- concordance, Holm and the paired bootstrap p-value -----------------------------------------


def test_concordance_counts_the_four_cells() -> None:
    a = np.array([1, 1, 0, 0, 1, 0, 1], dtype=float)
    b = np.array([1, 0, 1, 0, 0, 0, 1], dtype=bool)
    # By hand: right in A only at 1 and 4, in B only at 2, both at 0 and 6, neither at 3 and 5.
    c = concordance(a, b)
    assert (c.a_only, c.b_only, c.both, c.neither) == (2, 1, 2, 2)
    with pytest.raises(ValueError, match="concordance"):
        concordance(a, b[:3])


def test_draw_is_seeded_and_empty_without_items_or_samples() -> None:
    assert (draw(7, 20, 3) == draw(7, 20, 3)).all() and draw(7, 20, 3).shape == (20, 7)
    assert draw(0, 20, 3).shape == (0, 0) and draw(5, 0, 3).shape == (0, 5)
    assert bootstrap_p(np.ones(5), draw(5, 0, 3)) == 1.0
    assert bootstrap_p(np.zeros(0), draw(0, 10, 3)) == 1.0


def test_holm_matches_the_step_down_definition() -> None:
    p = [0.01, 0.04, 0.03, 0.005, 0.5]
    # By hand: sorted 0.005, 0.01, 0.03, 0.04, 0.5 times 5, 4, 3, 2, 1, running max, cap 1.
    assert holm(p) == pytest.approx([0.04, 0.09, 0.09, 0.025, 0.5])
    assert holm([0.6, 0.6]) == [1.0, 1.0] and holm([]) == []


def test_bootstrap_p_is_compares_mean_test() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 5, 200) / 4, rng.integers(0, 5, 200) / 4
    paired = pd.DataFrame({"correct_a": a, "correct_b": b})
    expected = mean_test("correct", paired, {"a": 4, "b": 4}, 1000, 11, 0.95)["p_value"]
    assert bootstrap_p(b - a, draw(200, 1000, 11)) == expected
    assert bootstrap_p(a - b, draw(200, 1000, 11)) == expected  # two-sided: symmetric


def test_paired_bootstrap_agrees_with_scipy_bootstrap() -> None:
    """The resampled mean differences (the test's statistic) against scipy's paired bootstrap:
    the same percentile interval up to Monte Carlo error."""
    rng = np.random.default_rng(5)
    a, b = rng.random(300), rng.random(300) + 0.05
    idx = draw(300, 4000, 1)
    ours = np.quantile((b - a)[idx].mean(axis=1), [0.025, 0.975])
    theirs = stats.bootstrap((a, b), lambda x, y: np.mean(y - x), paired=True,
                             n_resamples=4000, method="percentile", rng=2).confidence_interval
    assert ours == pytest.approx([theirs.low, theirs.high], abs=0.01)
    assert (b - a).mean() == pytest.approx(stats.ttest_rel(b, a).statistic
                                           * (b - a).std(ddof=1) / np.sqrt(300))
