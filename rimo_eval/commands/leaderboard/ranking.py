"""Rank ranges and "significantly below the leader", from the runs' per-item scores.

- Per-item values: each metric is sum(num) / sum(den) over items (den 1 but for RIMO-P's
  sub-problem accuracy), the items aligned by problem_id across runs (comparable.check made
  sure they are the same items).
- Rank range: a paired bootstrap over items. Every resample draws one set of item indices and
  applies it to every run, so the ranks move together as a paired comparison does; a run's
  range is the central ``confidence`` interval of its ranks over the resamples.
- Tests against the leader, Holm-corrected over the runs below it, decided as
  ``rimo-eval compare`` does: exact McNemar on a 0/1 outcome at k = 1, the paired bootstrap of
  per-item means otherwise: rimo_eval.stats's draw and p-value, compare's own, so with two runs
  the p-value is compare's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.commands.compare.samples import TEST_MEAN, per_item
from rimo_eval.commands.leaderboard.loading import Run
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.rimo.tracks import HEADLINE, TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.samples import first_sample
from rimo_eval.stats import bootstrap_p, concordance, draw, holm, mcnemar_exact

# A non-0/1 per-item score at k = 1 (prefix score, parts matched), or sample 0 at k > 1.
TEST_ITEM = "paired bootstrap on the per-item score"


@dataclass(frozen=True)
class Metric:
    name: str  # as flattened from metrics.json: RIMO-N.accuracy, RIMO-P.mean_at_k.strict, ...
    track: str
    key: str  # the key inside the track block, dotted
    binary: bool  # a per-item 0/1 outcome (McNemar applies) when k = 1


def rankable(k: int) -> list[Metric]:
    """The metrics a leaderboard can rank by: per-item ratios the score tables give."""
    out = [Metric(f"{t}.{m}", t, m, m in ("accuracy", "strict")) for t in TRACKS
           for m in HEADLINE[t]]
    if k > 1:
        out += [Metric(f"{t}.mean_at_k.{m}", t, f"mean_at_k.{m}", False) for t in TRACKS
                for m in HEADLINE[t]]
        out += [Metric(f"{TRACK_N}.pass_at_k", TRACK_N, "pass_at_k", True),
                Metric(f"{TRACK_N}.maj_at_k", TRACK_N, "maj_at_k", True),
                Metric(f"{TRACK_P}.pass_at_k", TRACK_P, "pass_at_k", True)]
    return out


def default_metric(k: int) -> str:
    # At k > 1 the number to report is mean@k (docs/concepts.md, "Repeated samples").
    return f"{TRACK_N}.mean_at_k.accuracy" if k > 1 else f"{TRACK_N}.accuracy"


def find_metric(name: str, k: int) -> Metric:
    known = {m.name: m for m in rankable(k)}
    if name not in known:
        raise ConfigError(f"--sort {name!r} is not a metric to rank by at k = "
                          f"{k}; one of {', '.join(known)}")
    return known[name]


def point(run: Run, metric: Metric) -> float | None:
    """The metric's value in the run's own metrics.json."""
    value: Any = run.metrics.get(metric.track, {})
    for part in metric.key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def item_table(run: Run, track: str) -> pd.DataFrame:
    """One row per item, by problem_id: sample 0's grades, and the per-item means over samples
    (``mean_*``), pass (any sample right) and RIMO-N's majority answer graded (``maj``)."""
    scores = run.scores[track]
    first = first_sample(scores).sort_values("problem_id", kind="stable").reset_index(drop=True)
    if track == TRACK_P:
        first = first[first["gradable"].astype(bool)].reset_index(drop=True)
    if int(scores["sample"].max()) > 0:
        means = per_item(track, scores).set_index("problem_id").loc[first["problem_id"]]
        col = "correct" if track == TRACK_N else "strict"
        for c in ("correct", "strict", "n_matched", "prefix_score"):
            if c in means.columns:
                first[f"mean_{c}"] = means[c].to_numpy(dtype=float)
        anyright = scores.groupby("problem_id")[col].max().loc[first["problem_id"]]
        first["pass"] = anyright.to_numpy(dtype=float)
        if "maj" in means.columns:
            first["maj"] = means["maj"].to_numpy(dtype=float)
    return first


# metric key -> (numerator column, denominator column or None for 1)
COLUMNS = {
    "accuracy": ("correct", None), "strict": ("strict", None),
    "sub_problem_accuracy": ("n_matched", "number_of_parts"),
    "prefix_score": ("prefix_score", None),
    "mean_at_k.accuracy": ("mean_correct", None), "mean_at_k.strict": ("mean_strict", None),
    "mean_at_k.sub_problem_accuracy": ("mean_n_matched", "number_of_parts"),
    "mean_at_k.prefix_score": ("mean_prefix_score", None),
    "pass_at_k": ("pass", None), "maj_at_k": ("maj", None),
}


def per_item_values(tables: Sequence[pd.DataFrame], metric: Metric
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(num, den), each items x runs."""
    num_col, den_col = COLUMNS[metric.key]
    num = np.column_stack([t[num_col].to_numpy(dtype=float) for t in tables])
    den = (np.ones_like(num) if den_col is None else
           np.column_stack([t[den_col].to_numpy(dtype=float) for t in tables]))
    return num, den


def ranks_of(values: np.ndarray) -> np.ndarray:
    """Competition ranks along the last axis: 1 + how many runs score strictly higher."""
    ranks: np.ndarray = 1 + (values[..., None, :] > values[..., :, None]).sum(axis=-1)
    return ranks


def rank_ranges(num: np.ndarray, den: np.ndarray, points: np.ndarray, idx: np.ndarray,
                confidence: float) -> list[dict[str, int]]:
    """Each run's rank (from its metrics.json value) and the central interval of its ranks
    over the paired resamples; the range always holds the point rank."""
    n = num.shape[0]
    point_rank = ranks_of(points)
    if n == 0 or len(idx) == 0:
        return [{"rank": int(r), "low": int(r), "high": int(r)} for r in point_rank]
    # Item counts per resample: one matrix product gives every run's resampled metric.
    weights = np.zeros((len(idx), n))
    np.add.at(weights, (np.repeat(np.arange(len(idx)), n), idx.ravel()), 1.0)
    stats = (weights @ num) / (weights @ den)
    # Rounded as metrics.json rounds, so a tie there is a tie here.
    ranks = ranks_of(np.round(stats, 6))
    alpha = (1 - confidence) / 2
    low = np.quantile(ranks, alpha, axis=0, method="lower")
    high = np.quantile(ranks, 1 - alpha, axis=0, method="higher")
    return [{"rank": int(r), "low": int(min(lo, r)), "high": int(max(hi, r))}
            for r, lo, hi in zip(point_rank, low, high, strict=True)]


def test_pair(metric: Metric, k: int, leader: tuple[np.ndarray, np.ndarray],
              other: tuple[np.ndarray, np.ndarray], idx: np.ndarray) -> dict[str, Any]:
    """The leader against one run on one metric, as compare decides the test."""
    (num_l, den_l), (num_o, den_o) = leader, other
    if metric.binary and (k == 1 or metric.key in ("pass_at_k", "maj_at_k")):
        lost, gained = concordance(num_l, num_o)[:2]
        return {"test": "exact McNemar", "leader_only": lost, "other_only": gained,
                "p_value": mcnemar_exact(lost, gained)}
    # A ratio with per-item denominators (sub-problem accuracy) compares numerators: the
    # denominators are the same items' part counts in both runs.
    if not np.array_equal(den_l, den_o):
        raise DataError(f"{metric.name}: per-item denominators differ between runs")
    diff = num_o - num_l
    name = TEST_MEAN if metric.key.startswith("mean_at_k.") else TEST_ITEM
    return {"test": name, "delta": round(float(diff.sum() / den_l.sum()), 6)
            if den_l.sum() else None, "p_value": bootstrap_p(diff, idx)}


def rank(runs: Sequence[Run], metric: Metric, samples: int, seed: int, confidence: float
         ) -> dict[str, Any]:
    """Order, rank ranges and tests against the leader for ``metric``; one entry per run in
    the input order."""
    k = runs[0].k
    tables = [item_table(r, metric.track) for r in runs]
    num, den = per_item_values(tables, metric)
    points = np.array([np.nan if (v := point(r, metric)) is None else v for r in runs])
    if np.isnan(points).any():
        bad = [r.label for r, v in zip(runs, points, strict=True) if np.isnan(v)]
        raise DataError(f"{metric.name} is not in the metrics.json of {bad}")
    # The per-item scores must reproduce each run's own number, or the ranks are of something
    # else than the table shows.
    with np.errstate(invalid="ignore", divide="ignore"):
        fresh = np.round(num.sum(axis=0) / den.sum(axis=0), 6)
    for r, v, f in zip(runs, points, fresh, strict=True):
        if not np.isclose(v, f, atol=2e-6):
            raise DataError(f"{r.label}: its scores give {metric.name} = {f}, its "
                            f"metrics.json says {v}: run `rimo-eval audit` at that revision")
    n = num.shape[0]
    idx = draw(n, samples, seed)
    ranges = rank_ranges(num, den, points, idx, confidence)
    order = sorted(range(len(runs)), key=lambda i: (-points[i], runs[i].label))
    leader = order[0]
    tests: dict[int, dict[str, Any]] = {
        i: test_pair(metric, k, (num[:, leader], den[:, leader]), (num[:, i], den[:, i]), idx)
        for i in order[1:]}
    adjusted = holm([tests[i]["p_value"] for i in order[1:]])
    alpha = 1 - confidence
    for i, p_holm in zip(order[1:], adjusted, strict=True):
        tests[i]["p_holm"] = round(p_holm, 6) if tests[i]["test"] != "exact McNemar" else p_holm
        tests[i]["below_leader"] = bool(p_holm < alpha and points[i] < points[leader])
    return {"metric": metric.name, "order": order, "leader": leader, "ranges": ranges,
            "tests": tests, "items": n,
            "bootstrap": {"samples": samples, "seed": seed, "confidence": confidence}}


__all__ = ["COLUMNS", "TEST_ITEM", "Metric", "default_metric", "find_metric", "item_table",
           "per_item_values", "point", "rank", "rank_ranges", "rankable", "ranks_of", "test_pair"]
