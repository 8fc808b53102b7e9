"""Which RIMO-N golds the runs' answers call into question.

An item's gold is suspect when the runs that missed it agree on one other answer more than
chance allows, and strong runs more than weak ones. Two tests per item, each a p-value under
the null "the gold is right":

* agreement: T = the sum of the strengths of the runs that gave answer ``a`` (the most weighty
  wrong answer). Under the null each run that missed the item gives ``a`` independently with a
  chance q, and T's distribution is that of a strength-weighted sum of Bernoulli(q) draws
  (computed exactly on a grid). q is what makes the test fair across items:
  - on a 0/1 item (gold 0 or 1), a wrong 0/1 answer is the other value: q is the share of
    wrong answers on the 0/1 items that are the other value, pooled over those items, close to
    1, so agreement there is (rightly) weak evidence;
  - elsewhere q is the larger of how often ``a`` is a wrong answer anywhere (a favourite
    fallback such as "1" or "0") and how much wrong answers coincide on a typical item (the
    75th percentile over items of the square root of the chance that two wrong answers agree,
    a bound on the share of the commonest one): common mistakes are not evidence.
* ordering: under the null the runs that solved the item are the stronger ones. When the runs
  giving ``a`` are stronger than the runs that matched the gold (a one-sided Mann-Whitney U),
  the gold looks like the mistake. This is the evidence left on a 0/1 item, where weak runs
  that guess hit a wrong gold half the time while strong ones give the right answer.

An item's p-value is the ordering test's on a 0/1 item; elsewhere the agreement test's, or, when
at least two runs matched the gold, the larger of the two (both must speak against the gold: a
trap answer that many runs share comes from weaker runs than the gold's). An item is suspect
when Benjamini-Hochberg at a false discovery rate of 5% keeps it among all items tested.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import mannwhitneyu

BINARY = frozenset({"0", "1"})
FDR = 0.05
GRID = 100  # strengths are rounded to 1/GRID for the exact null distribution
MIN_AGREE = 2  # fewer runs on one wrong answer is no agreement


@dataclass(frozen=True)
class GoldCheck:
    problem_id: str
    answer: str | None  # the wrong answer most agreed on (strength-weighted)
    runs: int  # how many runs gave it
    p_agreement: float
    p_ordering: float
    p_value: float
    suspect: bool = False


def _units(weights: list[float]) -> np.ndarray:
    """Strengths on the grid of the exact null distribution."""
    units: np.ndarray = np.rint(np.asarray(weights, dtype=float) * GRID).astype(int)
    return units


def _weighted_tail(units: np.ndarray, q: float, observed: int) -> float:
    """P(sum of u_r * Bernoulli(q) >= observed), for integer weights u_r."""
    dist = np.zeros(int(units.sum()) + 1)
    dist[0] = 1.0
    for u in units[units > 0]:
        new = dist * (1.0 - q)
        new[u:] += dist[:-u] * q
        dist = new
    return float(min(1.0, dist[observed:].sum()))


def _coincidence_rates(answers: np.ndarray, correct: np.ndarray, gold: Sequence[str]
                       ) -> tuple[float, float, Counter[str], int]:
    """The pooled 0/1 flip rate, the typical item's coincidence bound, and every wrong
    answer's count (with their total) over all items."""
    flips = binary_wrong = 0
    bounds: list[float] = []
    popularity: Counter[str] = Counter()
    for i, g in enumerate(gold):
        wrong = [str(x) for x, ok in zip(answers[:, i], correct[:, i], strict=True)
                 if not ok and x is not None]
        popularity.update(wrong)
        if g in BINARY:
            in_binary = [x for x in wrong if x in BINARY]
            flips += sum(x != g for x in in_binary)
            binary_wrong += len(in_binary)
        elif len(wrong) >= 2:
            counts = Counter(wrong).values()
            pairs = sum(n * (n - 1) for n in counts) / (len(wrong) * (len(wrong) - 1))
            bounds.append(float(np.sqrt(pairs)))
    flip = flips / binary_wrong if binary_wrong else 1.0
    typical = float(np.percentile(bounds, 75)) if bounds else 0.0
    return flip, typical, popularity, sum(popularity.values())


def _bh(p: np.ndarray, rate: float) -> np.ndarray:
    """Benjamini-Hochberg: which of the p-values are discoveries at the false discovery rate."""
    order = np.argsort(p, kind="stable")
    ranked = p[order] * len(p) / np.arange(1, len(p) + 1)
    passed = np.nonzero(ranked <= rate)[0]
    keep = np.zeros(len(p), dtype=bool)
    if len(passed):
        keep[order[: passed[-1] + 1]] = True
    return keep


def check_golds(problem_ids: Sequence[str], gold: Sequence[str], answers: np.ndarray,
                correct: np.ndarray, strength: np.ndarray, rate: float = FDR
                ) -> list[GoldCheck]:
    """One check per RIMO-N item. ``answers`` (runs x items, the extracted answer or None),
    ``correct`` (runs x items, bool) and ``strength`` (per run, in [0, 1]: its accuracy over
    the items) come from the runs; ``gold`` is each item's gold answer."""
    flip, typical, popularity, total = _coincidence_rates(answers, correct, gold)
    checks: list[GoldCheck] = []
    for i, (pid, g) in enumerate(zip(problem_ids, gold, strict=True)):
        wrong = [(r, str(answers[r, i])) for r in range(len(strength))
                 if not correct[r, i] and answers[r, i] is not None]
        weight: dict[str, float] = {}
        for r, x in wrong:
            weight.setdefault(x, 0.0)
            weight[x] += float(strength[r])
        if not weight:
            checks.append(GoldCheck(pid, None, 0, 1.0, 1.0, 1.0))
            continue
        # The heaviest wrong answer; ties by count, then by the answer itself (determinism).
        counts = Counter(x for _, x in wrong)
        best = max(weight, key=lambda x: (round(weight[x], 9), counts[x], x))
        if counts[best] < MIN_AGREE:
            checks.append(GoldCheck(pid, best, counts[best], 1.0, 1.0, 1.0))
            continue
        if g in BINARY and best in BINARY:
            q = flip
        else:
            q = max(typical, popularity[best] / total if total else 0.0)
        # Observed and null on the same grid: the observed sum is a subset of the null's terms.
        p_agree = _weighted_tail(_units([strength[r] for r, _ in wrong]), min(q, 1.0),
                                 int(_units([strength[r] for r, x in wrong if x == best]).sum()))
        giving = [float(strength[r]) for r, x in wrong if x == best]
        matching = [float(strength[r]) for r in range(len(strength)) if correct[r, i]]
        p_order = (float(mannwhitneyu(giving, matching, alternative="greater").pvalue)
                   if len(matching) >= 2 else 1.0)
        if g in BINARY and best in BINARY:
            p = p_order  # agreement says nothing here: q is 1
        elif len(matching) >= 2:
            # Both must speak against the gold (an intersection-union test, still of level
            # alpha): a trap answer many runs share is given by weaker runs than the gold's.
            p = max(p_agree, p_order)
        else:
            p = p_agree
        checks.append(GoldCheck(pid, best, counts[best], p_agree, p_order, p))
    p_all = np.array([c.p_value for c in checks])
    keep = _bh(p_all, rate) if len(checks) else np.zeros(0, dtype=bool)
    return [GoldCheck(**{**c.__dict__, "suspect": bool(k and c.answer is not None
                                                         and c.runs >= MIN_AGREE)})
            for c, k in zip(checks, keep, strict=True)]


__all__ = ["FDR", "GoldCheck", "check_golds"]
