"""The metrics block of reports/metrics.json and its plot tables, from the per-item scores.

``compute`` is the one definition: the score stage writes what it returns, and audit
recomputes with it, so the two cannot drift apart.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.artifacts.items import DOMAINS
from rimo_eval.artifacts.numbers import rounded
from rimo_eval.artifacts.paths import PLOT_FILES, YEAR_PLOT_FILES
from rimo_eval.artifacts.predictions import STATUS_ERROR, STATUS_MISSING
from rimo_eval.params.config import PredictParams, ScoreParams
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.rimo.years import OUTCOME
from rimo_eval.score.diagnostics import (
    FLAGS_P,
    diagnostics_n,
    diagnostics_p,
    has_flags,
    lenient_ratio,
)
from rimo_eval.score.floors import floor_blocks
from rimo_eval.score.samples import extend_metrics, first_sample, with_sample
from rimo_eval.score.trend import year_trend
from rimo_eval.score.years import band_rows, year_blocks
from rimo_eval.stats import Interval, mean_interval, proportion, ratio, wilson


def status_counts(df: pd.DataFrame) -> dict[str, int]:
    return {"missing": int((df["status"] == STATUS_MISSING).sum()),
            "errors": int((df["status"] == STATUS_ERROR).sum())}


def wilson_or_null(successes: int, n: int, boot: Mapping[str, Any]
                   ) -> dict[str, float | None]:
    return wilson(successes, n, float(boot["confidence"]))  # nulls when n is 0


def metrics_n(scores: pd.DataFrame, boot: Mapping[str, Any]) -> dict[str, Any]:
    """RIMO-N: accuracy is a proportion of items, so its interval (and each domain's) is
    Wilson's (rimo_eval.stats.wilson), not the bootstrap."""
    correct = scores["correct"].to_numpy(dtype=float)
    by_domain, by_domain_n, by_domain_ci = {}, {}, {}
    for domain in DOMAINS:
        part = scores[scores["domain"] == domain]
        if len(part):
            right = int(part["correct"].sum())
            by_domain[domain] = ratio(right, len(part))
            by_domain_n[domain] = len(part)
            by_domain_ci[domain] = wilson_or_null(right, len(part), boot)
    return {
        "accuracy": ratio(correct.sum(), len(correct)),
        "n": len(scores),
        "correct": int(correct.sum()),
        **status_counts(scores),
        "by_domain": by_domain,
        "by_domain_n": by_domain_n,
        "by_domain_ci": by_domain_ci,
        "ci": {"accuracy": wilson_or_null(int(correct.sum()), len(correct), boot)},
    }


def p_headline(df: pd.DataFrame) -> dict[str, Any]:
    """RIMO-P's three primary metrics over the (gradable) rows of ``df``."""
    return {
        "n": len(df),
        "strict": ratio(df["strict"].sum(), len(df)),
        "sub_problem_accuracy": ratio(df["n_matched"].sum(), df["number_of_parts"].sum()),
        "prefix_score": ratio(df["prefix_score"].sum(), len(df)),
    }


def _parts_intervals(graded: pd.DataFrame, boot: Mapping[str, Any]) -> dict[str, Any]:
    """Per number of parts: strict's Wilson interval and the prefix score's (a mean of
    fractions: rimo_eval.stats.means), flat beside each metric."""
    parts = graded["number_of_parts"].to_numpy(dtype=int)
    prefix = graded["prefix_score"].to_numpy(dtype=float)
    out = {}
    for k in sorted({int(k) for k in parts}):
        m = parts == k
        strict = wilson_or_null(int(graded["strict"].to_numpy()[m].sum()), int(m.sum()), boot)
        mean = mean_interval(prefix[m], None, float(boot["confidence"]))
        out[str(k)] = {"strict_ci_low": strict["low"], "strict_ci_high": strict["high"],
                       "prefix_score_ci_low": mean["low"], "prefix_score_ci_high": mean["high"]}
    return out


def metrics_p(scores: pd.DataFrame, boot: Mapping[str, Any]) -> dict[str, Any]:
    """RIMO-P: strict is a proportion (Wilson); prefix score and sub-problem accuracy are means
    of per-item fractions (sub-problems of one item are not independent): Wilson's interval of
    the sum over the items (rimo_eval.stats.means)."""
    graded = scores[scores["gradable"].astype(bool)]  # an empty column is object dtype
    confidence = float(boot["confidence"])
    parts = graded["number_of_parts"].to_numpy(dtype=float)
    ci_parts = _parts_intervals(graded, boot)
    by_parts = {str(k): {**p_headline(graded[graded["number_of_parts"] == k]),
                         **ci_parts[str(k)]}
                for k in sorted(graded["number_of_parts"].unique())}
    strict = graded["strict"].to_numpy(dtype=float)
    return {
        **p_headline(graded),
        "sub_problems": int(parts.sum()),
        **status_counts(graded),
        "ungradable": int((~scores["gradable"]).sum()),
        "by_parts": by_parts,
        "ci": {"strict": wilson_or_null(int(strict.sum()), len(strict), boot),
               "sub_problem_accuracy": mean_interval(graded["n_matched"].to_numpy(dtype=float),
                                                     parts, confidence),
               "prefix_score": mean_interval(graded["prefix_score"].to_numpy(dtype=float), None,
                                             confidence)},
    }


def sample_spec(predict_cfg: PredictParams | None) -> dict[str, Any]:
    """The sample predict ran under (``predict.limit``, ``predict.sample_seed``), recorded in the
    metrics so the report follows the run, not the current params.yaml."""
    if predict_cfg is None:
        return {"limit": None, "seed": None}
    # Recorded as the file has it: a seed it does not set is null, as ever.
    seed = predict_cfg.sample_seed if "sample_seed" in predict_cfg.model_fields_set else None
    return {"limit": predict_cfg.limit, "seed": seed}


def single_interval(boot: Mapping[str, Any]
                    ) -> Callable[[np.ndarray, np.ndarray | None], Interval]:
    """One metric's interval: sum(num)/sum(den) (den None: the mean). Per-item 0/1 outcomes
    with no denominator (pass@k, maj@k) are a proportion: Wilson; a mean of fractions (mean@k)
    Wilson's interval of the sum (rimo_eval.stats.means), which is the same on 0/1 values."""
    def ci(num: np.ndarray, den: np.ndarray | None) -> Interval:
        if den is None and len(num):
            found = proportion(num, float(boot["confidence"]))
            if found is not None:
                return found
        return mean_interval(num, den, float(boot["confidence"]))
    return ci


def compute(scores_by_track: Mapping[str, pd.DataFrame], totals: Mapping[str, int],
            boot: Mapping[str, Any], sample: Mapping[str, Any] | None = None,
            preds: Mapping[str, pd.DataFrame] | None = None,
            predict: PredictParams | None = None, cfg: ScoreParams | None = None
            ) -> dict[str, Any]:
    """Every metric of metrics.json but the provenance block, for the score stage and audit.

    ``totals`` is the number of items per track, so a sample run says it is one; ``sample`` is
    :func:`sample_spec`. The primary metrics are on sample 0, so k = 1 gives exactly the
    single-sample metrics; with ``preds`` the k-sample keys (k > 1) and each track's usage
    are added (rimo_eval.score.samples), priced by the ``predict`` section where it is given.
    ``cfg`` is the score section (pass@j, the training cutoff; None: the defaults)."""
    cfg = cfg if cfg is not None else ScoreParams()
    scores = {t: with_sample(df) for t, df in scores_by_track.items()}
    metrics: dict[str, Any] = {TRACK_N: metrics_n(first_sample(scores[TRACK_N]), boot),
                               TRACK_P: metrics_p(first_sample(scores[TRACK_P]), boot)}
    if preds is not None:
        extend_metrics(metrics, scores, dict(preds), single_interval(boot), cfg, predict)
    # The year lens (descriptive, breakdown.json): bands and unseen on sample 0, trend k-aware.
    for track in TRACKS:
        metrics[track].update(year_blocks(first_sample(scores[track]), track,
                                          float(boot["confidence"]), cfg.training_cutoff))
        metrics[track]["year_trend"] = year_trend(scores[track], track, float(boot["confidence"]))
    # RIMO-N's floor and answer types (context, breakdown.json): sample 0, as the headline.
    metrics[TRACK_N].update(floor_blocks(first_sample(scores[TRACK_N]), float(boot["confidence"])))
    if has_flags(scores[TRACK_N]):  # scores from before the flags have no diagnostics
        first = first_sample(scores[TRACK_N])
        metrics[TRACK_N]["diagnostics"] = diagnostics_n(scores[TRACK_N], first)
        # lenient_accuracy is a proportion of items (per-item 0/1): Wilson, as accuracy.
        lenient = lenient_ratio(first)[0]
        metrics[TRACK_N]["ci"]["diagnostics"] = {
            "lenient_accuracy": wilson_or_null(int(lenient.sum()), len(lenient), boot)}
    if has_flags(scores[TRACK_P], FLAGS_P):  # scores from before the engine's flags: none
        metrics[TRACK_P]["diagnostics"] = diagnostics_p(scores[TRACK_P])
    evaluated = {t: len(first_sample(scores[t])) for t in TRACKS}
    total = {t: int(totals[t]) for t in TRACKS}
    metrics["sample"] = {"evaluated": evaluated, "total": total, "is_sample": evaluated != total,
                         **sample_spec(None), **(sample or {})}
    return metrics


def _csv(rows: list[dict[str, Any]], columns: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def plot_tables(metrics: Mapping[str, Any]) -> dict[str, str]:
    """CSV plot data for ``dvc plots``: RIMO-N accuracy by domain, RIMO-P scores by parts, and
    each track's accuracy (RIMO-P: strict) by year band."""
    n, p = metrics[TRACK_N], metrics[TRACK_P]
    cis = n.get("by_domain_ci") or {}
    by_domain = [{"domain": d, "accuracy": acc,
                  "accuracy_ci_low": (cis.get(d) or {}).get("low"),
                  "accuracy_ci_high": (cis.get(d) or {}).get("high"), "n": n["by_domain_n"][d]}
                 for d, acc in n["by_domain"].items()]
    cols = ["prefix_score", "prefix_score_ci_low", "prefix_score_ci_high", "strict",
            "strict_ci_low", "strict_ci_high", "sub_problem_accuracy", "n"]
    by_parts = [{"parts": k, **{m: v.get(m) for m in cols}} for k, v in p["by_parts"].items()]
    tables = {
        PLOT_FILES[TRACK_N]: _csv(by_domain, ["domain", "accuracy", "accuracy_ci_low",
                                              "accuracy_ci_high", "n"]),
        PLOT_FILES[TRACK_P]: _csv(by_parts, ["parts", *cols]),
    }
    for track, name in YEAR_PLOT_FILES.items():
        if "by_year_band" in metrics[track]:  # runs from before the year lens: none
            m = OUTCOME[track]
            tables[name] = _csv(band_rows(metrics[track]["by_year_band"], m),
                                ["band", m, f"{m}_ci_low", f"{m}_ci_high", "n"])
    return tables


__all__ = ["compute", "metrics_n",
           "metrics_p", "p_headline", "plot_tables", "ratio", "rounded", "status_counts"]
