"""Synthetic runs for the item audit: a 2PL population of runs answering RIMO-N-like items, with
golds planted wrong on some items (the runs that know the item give its true answer, which the
listed gold is not).

What makes it hard, as on the real benchmark: 96 of 335 golds are 0 or 1 (a wrong answer there
is the other value), half the items have a trap answer that wrong runs share, and weak runs fall
back to "1" or "0". The tool must flag the planted items and not these.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Population:
    problem_ids: list[str]
    gold: list[str]  # the listed gold, wrong on the planted items
    truth: list[str]
    answers: np.ndarray  # runs x items, str
    correct: np.ndarray  # runs x items, bool (answer == listed gold)
    planted: set[str]
    binary: set[str]  # items whose listed gold is 0 or 1


def _integer(rng: np.random.Generator, avoid: set[str]) -> str:
    while True:
        value = str(int(np.exp(rng.uniform(np.log(2), np.log(5000)))))
        if value not in avoid:
            return value


def draw(seed: int, runs: int = 50, items: int = 335, planted: int = 12,
         planted_binary: int = 4) -> Population:
    rng = np.random.default_rng(seed)
    n_binary = round(items * 96 / 335)
    gold = ["1" if i < round(items * 73 / 335) else "0" if i < n_binary else ""
            for i in range(items)]
    gold = [g or _integer(rng, set()) for g in gold]
    ids = [f"s{i:03d}" for i in range(items)]
    a = rng.lognormal(0.0, 0.3, items)
    b = rng.normal(0.5, 1.2, items)
    trap = [_integer(rng, {g}) if rng.random() < 0.5 else None for g in gold]
    trap_rate = rng.uniform(0.1, 0.4, items)
    chosen = set(rng.choice(np.arange(n_binary), planted_binary, replace=False).tolist())
    chosen |= set(rng.choice(np.arange(n_binary, items), planted - planted_binary,
                             replace=False).tolist())
    truth = list(gold)
    for i in chosen:
        truth[i] = ("0" if gold[i] == "1" else "1") if gold[i] in ("0", "1") else \
            _integer(rng, {gold[i]})
        b[i] = rng.normal(-0.5, 0.7)  # items the strong runs know
    theta = rng.normal(0.0, 1.2, runs)
    answers = np.empty((runs, items), dtype=object)
    for r in range(runs):
        knows = rng.random(items) < 1.0 / (1.0 + np.exp(-a * (theta[r] - b)))
        for i in range(items):
            t = truth[i]
            if knows[i]:
                answers[r, i] = t
            elif t in ("0", "1") and rng.random() < 0.9:
                answers[r, i] = "0" if t == "1" else "1"
            elif trap[i] is not None and rng.random() < trap_rate[i]:
                answers[r, i] = trap[i]
            elif theta[r] < -1.0 and rng.random() < 0.3:
                answers[r, i] = "1"
            else:
                answers[r, i] = _integer(rng, {t})
    correct = answers == np.array(gold, dtype=object)[None, :]
    return Population(ids, gold, truth, answers, correct.astype(bool),
                      {ids[i] for i in chosen},
                      {ids[i] for i, g in enumerate(gold) if g in ("0", "1")})
