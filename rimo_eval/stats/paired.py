"""Paired 0/1 outcomes of two runs on the same items: the concordance counts, the exact McNemar
on the discordant pairs, and Holm's correction over several such tests."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np


class Concordance(NamedTuple):
    a_only: int  # right in A, wrong in B
    b_only: int  # wrong in A, right in B
    both: int
    neither: int


def concordance(a: np.ndarray | Sequence[bool], b: np.ndarray | Sequence[bool]) -> Concordance:
    """The 2x2 table of two aligned 0/1 outcomes (any truthy value counts as right)."""
    x, y = np.asarray(a).astype(bool), np.asarray(b).astype(bool)
    if x.shape != y.shape:
        raise ValueError(f"concordance: {x.shape} against {y.shape} outcomes")
    return Concordance(int((x & ~y).sum()), int((~x & y).sum()), int((x & y).sum()),
                       int((~x & ~y).sum()))


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


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: (p_values[i], i))
    adjusted = [0.0] * m
    running = 0.0
    for step, i in enumerate(order):
        running = max(running, min(1.0, (m - step) * p_values[i]))
        adjusted[i] = running
    return adjusted


__all__ = ["Concordance", "concordance", "holm", "mcnemar_exact"]
