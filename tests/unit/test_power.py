"""The power planner (rimo_eval.stats.power, ``rimo-eval plan``) against simulation: runs drawn
item by item under the planner's assumptions and tested as ``rimo-eval compare`` tests them (the
exact McNemar at k = 1, the paired bootstrap p-value of per-item means at k > 1). The planner's
minimum detectable difference must lie within 0.01 of the simulated one: the simulated power is
below 80% at MDD - 0.01 and at least 80% at MDD + 0.01 (docs/statistics.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rimo_eval.stats import bootstrap_p, draw, mcnemar_exact
from rimo_eval.stats.power import items_needed, mcnemar_power, min_detectable, samples_needed

TOL = 0.01


def simulated_mcnemar(n: int, psi: float, delta: float, sims: int, seed: int) -> float:
    """Share of simulated run pairs compare's exact McNemar calls different at 0.05: each item
    is right in B only, in A only, or the same, with probabilities (psi ± delta) / 2."""
    counts = np.random.default_rng(seed).multinomial(
        n, [(psi + delta) / 2, (psi - delta) / 2, 1 - psi], size=sims)
    return float(np.mean([mcnemar_exact(int(c[1]), int(c[0])) <= 0.05 for c in counts]))


def simulated_means(n: int, k: int, psi: float, rho: float, delta: float, sims: int,
                    seed: int) -> float:
    """k samples per item; one sample pair differs by +1 or -1 with probabilities
    (psi ± delta) / 2; with probability rho an item's k pairs are one draw repeated, else k
    independent ones (correlation rho). Tested by compare's paired bootstrap p-value."""
    rng = np.random.default_rng(seed)
    probs = [(psi + delta) / 2, (psi - delta) / 2, 1 - psi]
    hits = 0
    for rep in range(sims):
        values = rng.choice([1.0, -1.0, 0.0], p=probs, size=(n, k))
        shared = rng.random(n) < rho
        values[shared] = values[shared, :1]
        diff = values.mean(axis=1)
        hits += bootstrap_p(diff, draw(n, 400, rep)) <= 0.05
    return hits / sims


@pytest.mark.parametrize("n,psi", [(335, 0.2), (100, 0.3), (40, 0.5)])
def test_mcnemar_mdd_agrees_with_simulation(n: int, psi: float) -> None:
    mdd = min_detectable(n, 1, psi)
    assert mdd is not None
    assert mcnemar_power(n, psi, mdd) == pytest.approx(0.8, abs=0.03)
    assert simulated_mcnemar(n, psi, mdd - TOL, 4000, 1) < 0.8
    assert simulated_mcnemar(n, psi, min(psi, mdd + TOL), 4000, 2) >= 0.8
    # The exact power itself against the simulation, at the MDD.
    assert simulated_mcnemar(n, psi, mdd, 4000, 3) == pytest.approx(mcnemar_power(n, psi, mdd),
                                                                    abs=0.03)


def test_mean_at_k_mdd_agrees_with_simulation() -> None:
    n, k, psi, rho = 335, 4, 0.2, 0.5
    mdd = min_detectable(n, k, psi, rho)
    assert mdd is not None and mdd < min_detectable(n, 1, psi)  # more samples: smaller
    assert simulated_means(n, k, psi, rho, mdd - TOL, 400, 11) < 0.8
    assert simulated_means(n, k, psi, rho, mdd + TOL, 400, 12) >= 0.8


def test_items_and_samples_needed_reach_the_power() -> None:
    n = items_needed(0.05, 1, 0.2)
    assert n is not None and mcnemar_power(n, 0.2, 0.05) >= 0.8 > mcnemar_power(n - 20, 0.2,
                                                                                0.05)
    k = samples_needed(0.05, 335, 0.2, 0.5)
    assert k is not None and min_detectable(335, k, 0.2, 0.5) <= 0.05 < min_detectable(
        335, k - 1, 0.2, 0.5)
    assert samples_needed(0.1, 50, 0.2, 0.5) is None  # the items' own spread: no k suffices
    assert min_detectable(5, 1, 0.2) is None  # 5 items: nothing is detectable


def test_the_plan_command(tmp_path: Path) -> None:
    """The real CLI, no params file: every RIMO-N item at k = 1, and a target."""
    out = subprocess.run([sys.executable, "-m", "rimo_eval", "plan", "--target", "0.05",
                          "--json"], cwd=tmp_path, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert (result["items"], result["k"], result["test"]) == (335, 1, "exact McNemar")
    assert result["min_detectable_difference"] == min_detectable(335, 1, 0.2)
    assert result["target"]["items_needed"] == items_needed(0.05, 1, 0.2)
    text = subprocess.run([sys.executable, "-m", "rimo_eval", "plan", "--items", "100"],
                          cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    mdd = min_detectable(100, 1, 0.2)
    assert mdd is not None
    assert f"Minimum detectable difference in RIMO-N accuracy: {mdd * 100:.1f} points." in text
    bad = subprocess.run([sys.executable, "-m", "rimo_eval", "plan", "--target", "0.5"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 1 and "--target must be in (0, --discordance 0.2]" in bad.stderr
