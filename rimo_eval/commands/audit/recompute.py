"""Every value of metrics.json and the plot tables, recomputed from the per-item scores with
the score stage's own ``metrics.compute``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rimo_eval.artifacts.flat_keys import flatten
from rimo_eval.artifacts.paths import JUDGE_METRICS_PATH, JUDGE_TABLE, PLOTS_DIR
from rimo_eval.commands.audit.ledger import MISSING, Ledger
from rimo_eval.judge.metrics import audit_check
from rimo_eval.params.config import PredictParams, ScoreParams
from rimo_eval.rimo.tracks import TRACKS
from rimo_eval.score.metrics import compute, plot_tables, sample_spec


def recompute_metrics(scores: Mapping[str, pd.DataFrame], totals: Mapping[str, int],
                      boot: Mapping[str, Any],
                      preds: Mapping[str, pd.DataFrame] | None = None,
                      predict: PredictParams | None = None, score: ScoreParams | None = None
                      ) -> dict[str, Any]:
    """The metrics block exactly as the score stage derives it from the per-item scores
    (the sample block from ``predict``'s limit and sample_seed, the price from its backend's
    section; ``score``: pass@j and the training cutoff)."""
    return compute(scores, totals, boot, sample_spec(predict), preds, predict, score)


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        # Both sides went through the same rounding; the tolerance only absorbs summation order.
        return math.isclose(a, b, rel_tol=0, abs_tol=1e-9)
    return bool(a == b)


@dataclass
class MetricResult:
    name: str
    value: Any
    recomputed: Any
    recomputes: bool
    tracks: tuple[str, ...]
    ok: bool = True
    file: str = ""  # the file it is in: metrics.json, or breakdown.json for a breakdown value

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "file": self.file, "value": self.value,
                "recomputed": None if self.recomputed is MISSING else self.recomputed,
                "recomputes": self.recomputes, "tracks": list(self.tracks), "ok": self.ok}


def metric_tracks(name: str) -> tuple[str, ...]:
    head = name.split(".", 1)[0]
    return (head,) if head in TRACKS else TRACKS


def check_metrics(ledger: Ledger, metrics: Mapping[str, Any], fresh: Mapping[str, Any],
                  shown: str, sources: Mapping[str, str]) -> list[MetricResult]:
    have = flatten({k: v for k, v in metrics.items() if k != "provenance"})
    want = flatten(fresh)
    results = []
    for name in [*have, *(k for k in want if k not in have)]:
        value, again = have.get(name, MISSING), want.get(name, MISSING)
        tracks = metric_tracks(name)
        src = " and ".join(sources[t] for t in tracks)
        ok = value is not MISSING and again is not MISSING and same_value(value, again)
        results.append(MetricResult(name, None if value is MISSING else value, again, ok,
                                    tracks, file=shown))
        if ok:
            continue
        if value is MISSING:
            msg = f"{shown}: {name} is missing; it recomputes to {again!r} from {src}"
        elif again is MISSING:
            msg = f"{shown}: {name} = {value!r} is not a metric the scores produce"
        else:
            msg = (f"{shown}: {name} = {value!r} does not recompute: {src} give {again!r} "
                   f"(metric edited, or scores changed after it was written)")
        ledger.broke("metrics.recompute", shown, msg)
    if results and all(r.recomputes for r in results):
        ledger.ok("metrics.recompute", shown, f"{shown}: {len(results)} values recompute")
    return results


def check_plots(ledger: Ledger, root: Path, fresh: Mapping[str, Any]) -> None:
    for name, text in plot_tables(fresh).items():
        path = root / PLOTS_DIR / name
        shown = (PLOTS_DIR / name).as_posix()
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        ledger.verdict(same, "plots.recompute", shown, f"{shown}: recomputes from the metrics",
                       f"{shown}: does not recompute from the metrics")


def check_judge(ledger: Ledger, root: Path, boot: Mapping[str, Any]) -> None:
    """The opt-in judge's metrics against its own table; nothing where the judge never ran."""
    judged = audit_check(root, JUDGE_TABLE, JUDGE_METRICS_PATH, boot)
    if judged is not None:
        (ledger.ok if judged[0] else ledger.broke)("judge.recompute",
                                                   JUDGE_METRICS_PATH.as_posix(), judged[1])


__all__ = ["MetricResult", "check_judge", "check_metrics", "check_plots", "metric_tracks",
           "recompute_metrics", "same_value"]
