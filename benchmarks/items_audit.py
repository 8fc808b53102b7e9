"""The item audit (``rimo-eval items``) at scale: 50 runs x 791 items (goal: 10 s), and the
suspect-gold check's precision and recall on planted populations.

The runs are a synthetic 2PL population (``tests/support/irt_population.py``): 335 RIMO-N-like
items (96 golds 0 or 1, trap answers, weak runs' fallbacks) with 12 golds planted wrong, 4 of
them 0/1, and 456 RIMO-P-like items of 0/1 outcomes. What is timed is the audit itself
(``rimo_eval.commands.items.audit.audit``: the 2PL fit and the gold check), in this process.

    .venv/bin/python benchmarks/items_audit.py [--runs 50] [--seeds 10]
    .venv/bin/python benchmarks/items_audit.py --quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rimo_eval.commands.items.audit import Matrix, audit  # noqa: E402
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P  # noqa: E402
from tests.support.irt_population import draw  # noqa: E402


def full_matrix(seed: int, runs: int, n_items: int, p_items: int) -> tuple[Matrix, set[str],
                                                                          set[str]]:
    pop = draw(seed, runs=runs, items=n_items)
    rng = np.random.default_rng(seed + 1000)
    b = rng.normal(1.0, 1.0, p_items)
    theta = rng.normal(0.0, 1.2, runs)
    solved_p = rng.random((runs, p_items)) < 1 / (1 + np.exp(-(theta[:, None] - b)))
    m = Matrix(runs=[f"run{r}" for r in range(runs)],
               tracks=[TRACK_N] * n_items + [TRACK_P] * p_items,
               problem_ids=pop.problem_ids + [f"p{i:03d}" for i in range(p_items)],
               gold=[*pop.gold, *[None] * p_items],
               correct=np.concatenate([pop.correct, solved_p], axis=1),
               answers=np.concatenate([pop.answers, np.full((runs, p_items), None)], axis=1))
    return m, pop.planted, pop.binary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="10 runs, 2 seeds")
    args = parser.parse_args()
    runs, seeds = (10, 2) if args.quick else (args.runs, args.seeds)
    n_items, p_items = 335, 456
    walls: list[float] = []
    found = flagged = planted = found_binary = planted_binary = 0
    converged = 0
    for seed in range(seeds):
        m, truth, binary = full_matrix(seed, runs, n_items, p_items)
        started = time.perf_counter()
        result = audit(m)
        walls.append(time.perf_counter() - started)
        converged += result["irt"]["converged"]
        suspects = set(result["suspect_gold"]["items"])
        found += len(suspects & truth)
        flagged += len(suspects)
        planted += len(truth)
        found_binary += len(suspects & truth & binary)
        planted_binary += len(truth & binary)
    print(f"load {os.getloadavg()[0]:.2f}; {runs} runs x {n_items + p_items} items, "
          f"{seeds} populations")
    print(f"| {runs} runs x {n_items + p_items} items | audit {statistics.median(walls):.2f} s "
          f"(median; {min(walls):.2f}-{max(walls):.2f}) | fits converged {converged}/{seeds} |")
    precision = found / flagged if flagged else float("nan")
    print(f"suspect_gold: precision {precision:.2f} ({found}/{flagged}), recall "
          f"{found / planted:.2f} ({found}/{planted}); on 0/1 items {found_binary}/"
          f"{planted_binary}")


if __name__ == "__main__":
    main()
