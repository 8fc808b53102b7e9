"""compare with k samples per item: pair items on their per-item mean over the samples.

A per-item mean is not a 0/1 outcome, so McNemar does not apply to it; the test is a paired
bootstrap on the mean. McNemar stays for 0/1 outcomes: k = 1, and maj@k (RIMO-N).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.rimo.tracks import TRACK_N
from rimo_eval.score.samples import majority
from rimo_eval.stats import bootstrap_p, concordance, draw, mcnemar_exact

MEANS = ("correct", "strict", "n_matched", "prefix_score", "n_predicted", "prefix_len")
TEST_MEAN = "paired bootstrap on the per-item mean over samples"


def sample_count(scores: pd.DataFrame) -> int:
    if "sample" not in scores.columns or scores.empty:
        return 1
    return int(scores["sample"].max()) + 1


def per_item(track: str, scores: pd.DataFrame) -> pd.DataFrame:
    """One row per item: graded columns averaged over the item's samples (a failed sample is
    already wrong in the scores), the rest taken from sample 0; RIMO-N also gets ``maj``."""
    if "sample" not in scores.columns:
        return scores
    if sample_count(scores) == 1:
        return scores.drop(columns="sample")
    ordered = scores.sort_values(["problem_id", "sample"], kind="stable")
    groups = ordered.groupby("problem_id", sort=True)
    out = groups.first().reset_index().drop(columns="sample")
    for col in MEANS:
        if col in out.columns:
            out[col] = groups[col].mean().to_numpy(dtype=float)
    if track == TRACK_N:
        out["maj"] = [majority(g["prediction"].tolist()) == str(g["gold"].iloc[0]).strip()
                      for _, g in groups]
    return out


def as_mean_at_k(track: str, named: dict[str, Any]) -> dict[str, Any]:
    """Deltas over per-item means are deltas of the mean@k metrics: name them so, which lines
    them up with metrics.json's ``<track>.mean_at_k.*`` rows (not the sample-0 headline)."""
    return {f"{track}.mean_at_k.{name.removeprefix(track + '.')}": v
            for name, v in named.items()}


def mean_test(col: str, paired: pd.DataFrame, k: dict[str, int], samples: int, seed: int,
              confidence: float) -> dict[str, Any]:
    """Paired bootstrap of mean(B) - mean(A) over items; two-sided p from the share of
    resampled deltas on either side of 0 (the interval's own duality), capped at 1."""
    a = paired[f"{col}_a"].to_numpy(dtype=float)
    b = paired[f"{col}_b"].to_numpy(dtype=float)
    diff = b - a
    return {
        "name": TEST_MEAN, "metric": f"mean_at_k.{col}", "k": k,
        "delta": round(float(diff.mean()), 6) if len(diff) else None,
        "confidence": confidence,
        # "Right in A only" becomes "higher mean in A", so the tables keep their columns.
        "right_in_a_only": int((diff < 0).sum()), "right_in_b_only": int((diff > 0).sum()),
        "discordant": int((diff != 0).sum()),
        "both_right": int(((a == 1) & (b == 1)).sum()),
        "both_wrong": int(((a == 0) & (b == 0)).sum()),
        "p_value": bootstrap_p(diff, draw(len(diff), samples, seed)),
    }


def mcnemar_test(metric: str, a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Exact McNemar on a paired 0/1 outcome (per item, A and B), in compare's words."""
    c = concordance(a, b)
    return {"name": "exact McNemar", "metric": metric, "right_in_a_only": c.a_only,
            "right_in_b_only": c.b_only, "discordant": c.a_only + c.b_only,
            "both_right": c.both, "both_wrong": c.neither,
            "p_value": mcnemar_exact(c.a_only, c.b_only)}


def maj_mcnemar(paired: pd.DataFrame) -> dict[str, Any] | None:
    """Exact McNemar on maj@k, a 0/1 outcome, when both sides have it."""
    if not {"maj_a", "maj_b"} <= set(paired.columns):
        return None
    return mcnemar_test("maj_at_k", paired["maj_a"].to_numpy(), paired["maj_b"].to_numpy())


def which_test(k: dict[str, int]) -> str:
    """One line saying which test applies, for the rendered output."""
    if max(k.values()) == 1:
        return "k = 1: items paired on their 0/1 outcome; exact McNemar on the discordant pairs."
    return (f"k = {k['a']} (A), {k['b']} (B) samples per item: items paired on their per-item "
            f"mean over samples; {TEST_MEAN} (McNemar needs a 0/1 outcome: it is shown for "
            f"maj@k only).")
