"""The leaderboard as one JSON object, ``{"runs": [...], ...}``: what every rendering reads.

Each run carries its label and every numeric key of its own metrics.json, flattened with dots
under the track (``RIMO-N.accuracy``, ``RIMO-N.accuracy_ci_low``, ``RIMO-P.usage.cost_usd``...),
copied, never recomputed, so every point value is the run's own. Old runs' RIMO-N ``ci_low`` /
``ci_high`` are named ``accuracy_ci_low`` / ``accuracy_ci_high`` here, the names of the
interval contract. The rank and the test against the leader come from ranking.rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rimo_eval.artifacts.flat_keys import flatten
from rimo_eval.artifacts.metrics_files import LEGACY_N
from rimo_eval.commands.leaderboard.loading import Run
from rimo_eval.commands.leaderboard.ranking import Metric, rank
from rimo_eval.commands.leaderboard.years import year_keys
from rimo_eval.rimo.tracks import TRACK_N, TRACKS


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def metric_keys(run: Run) -> dict[str, Any]:
    """Every number of the run's metrics.json per track, dotted, in the file's own order."""
    out: dict[str, Any] = {}
    for track in TRACKS:
        block = run.metrics.get(track) or {}
        for key, value in flatten(block).items():
            if track == TRACK_N:
                key = LEGACY_N.get(key, key)
            if _number(value) or value is None:
                out[f"{track}.{key}"] = value
    return out


def interval(row: Mapping[str, Any], name: str) -> tuple[float | None, float | None]:
    return row.get(f"{name}_ci_low"), row.get(f"{name}_ci_high")


def judge_keys(run: Run) -> dict[str, Any] | None:
    """The opt-in judge's numbers (``RIMO-P.judge.*``, its model), never primary, where the
    judge ran. Intervals nested under ``ci`` (judge.json of today) or flat ``_ci_low`` /
    ``_ci_high`` keys both come out flat."""
    if not run.judge:
        return None
    out: dict[str, Any] = {"primary": False}
    for key, value in flatten(run.judge).items():
        if key.startswith("ci.") and key.endswith((".low", ".high")):
            name, _, end = key.removeprefix("ci.").rpartition(".")
            key = f"{name}_ci_{end}"
        elif not (_number(value) or key == "model"):
            continue
        out[f"RIMO-P.judge.{key}"] = value
    return out


def build(runs: Sequence[Run], metric: Metric, boot: Mapping[str, Any],
          cutoffs: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The leaderboard object, runs in rank order (ties by label); ``cutoffs`` (run -> training
    cutoff, ``--cutoff``) add each run's unseen subset (rimo_eval.commands.leaderboard.years)."""
    ranked = rank(runs, metric, int(boot["samples"]), int(boot["seed"]),
                  float(boot["confidence"]))
    leader = runs[ranked["leader"]]
    rows = []
    for i in ranked["order"]:
        run = runs[i]
        test = ranked["tests"].get(i)
        rows.append({
            "label": run.label,
            "revision": run.revision.to_json(),
            "backend": run.backend, "model": run.model, "k": run.k,
            "date": run.date, "commit": run.commit,
            **metric_keys(run),
            "judge": judge_keys(run),
            # Descriptive (the year trend, the unseen subset): never what the rank uses.
            "years": year_keys(run, cutoffs or {}, float(boot["confidence"])),
            "rank": {"metric": metric.name, **ranked["ranges"][i]},
            "vs_leader": None if test is None else {"leader": leader.label, **test},
        })
    return {
        "ranked_by": metric.name,
        "k": runs[0].k,
        "items": {t: _items(runs[0], t) for t in TRACKS},
        # Comparable runs evaluated the same items, so they share one floor (context, never
        # the rank): what a constant answer scores on these RIMO-N items.
        "floor": ((runs[0].breakdown.get(TRACK_N) or {}).get("baselines") or {}).get(
            "best_constant"),
        "bootstrap": ranked["bootstrap"],
        "method": {
            "rank": "paired bootstrap over items (one index draw for every run); the range is "
                    "the central interval of each run's rank over the resamples",
            "vs_leader": "exact McNemar (0/1 outcome, k = 1) or paired bootstrap of per-item "
                         "means (k > 1, or a non-0/1 metric), as rimo-eval compare decides; "
                         "Holm-adjusted over the runs below the leader",
        },
        "runs": rows,
    }


def _items(run: Run, track: str) -> int:
    frame = run.scores[track]
    first = frame[frame["sample"] == 0]
    if "gradable" in first.columns:
        return int(first["gradable"].astype(bool).sum())
    return len(first)


__all__ = ["build", "interval", "judge_keys", "metric_keys"]
