"""How the score stage's metrics are laid out on disk: three files, one job each.

- ``reports/metrics.json``: only what a user compares (the DVC metrics file), headline first,
  every interval a flat ``<metric>_ci_low`` / ``<metric>_ci_high`` pair beside its metric, so
  ``dvc exp show`` leads with the numbers and ``dvc metrics diff`` lists numbers only.
- ``reports/breakdown.json``: by domain, by number of parts, and their counts (git-versioned,
  shown by the report and compare, not a DVC metrics file).
- ``reports/provenance.json``: where the numbers came from; metrics.json names it and its sha256
  in a list, a type DVC's metrics commands skip, so the pointer never shows as a "metric".

``split`` writes the layout from :func:`rimo_eval.score.metrics.compute`'s nested block; ``join``
reads it back into that block, so the report and compare keep one shape to read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

from rimo_eval.artifacts.paths import BREAKDOWN_PATH, METRICS_PATH, PROVENANCE_PATH
from rimo_eval.io.json_object import read_object
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS

# metrics.json's pointer to the provenance file: [path, sha256].
POINTER_KEY = "provenance"
# How the sample was drawn (predict.limit, predict.sample_seed): provenance, not a metric. In
# metrics.json a full run's null limit against a sample's number would crowd `dvc metrics diff`.
SAMPLE_KEY = "sample"
SAMPLE_SPEC = ("limit", "seed")
# Per track: the headline keys in the order a user reads them; "ci" is where the headline
# intervals go. Every other key of the block follows, in the block's own order.
HEADLINE: dict[str, tuple[str, ...]] = {
    TRACK_N: ("accuracy", "ci", "n", "correct", "missing", "errors"),
    TRACK_P: ("prefix_score", "strict", "sub_problem_accuracy", "ci", "n", "ungradable",
              "missing", "errors"),
}
# The year lens (rimo_eval.score.years, rimo_eval.score.trend) is a breakdown too: descriptive.
YEAR_KEYS = ("by_year_band", "unseen", "year_trend")
BREAKDOWN_KEYS: dict[str, tuple[str, ...]] = {
    # RIMO-N's floor and answer types (rimo_eval.score.floors): context, not a metric.
    TRACK_N: ("by_domain", "by_domain_n", "by_domain_ci", *YEAR_KEYS, "baselines",
              "by_answer_type"),
    TRACK_P: ("sub_problems", "by_parts", *YEAR_KEYS),
}
LOW, HIGH = "_ci_low", "_ci_high"
# RIMO-N accuracy's interval in runs from before the uniform names, and its name today.
LEGACY_N = {"ci_low": "accuracy" + LOW, "ci_high": "accuracy" + HIGH}


def _is_interval(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, Mapping) and set(value) == {"low", "high"}


def interval(block: Mapping[str, Any], metric: str) -> tuple[Any, Any]:
    """(low, high) of a metric's interval in a metrics.json block, None where it has none:
    every interval is ``<metric>_ci_low`` / ``<metric>_ci_high``, but RIMO-N accuracy's in a run
    from before the uniform names, which are ``LEGACY_N``'s. The one reader of the old keys."""
    low, high = block.get(metric + LOW), block.get(metric + HIGH)
    if low is None and metric == "accuracy":
        low, high = (block.get(old) for old in LEGACY_N)
    return low, high


def _with_intervals(block: Mapping[str, Any], ci: Mapping[str, Any]) -> dict[str, Any]:
    """``block`` with each interval of ``ci`` (same nesting) flat right after its metric."""
    out: dict[str, Any] = {}
    for key, value in block.items():
        sub = ci.get(key)
        if isinstance(value, Mapping):
            out[key] = _with_intervals(value, sub if isinstance(sub, Mapping) else {})
        else:
            out[key] = value
        if isinstance(sub, Mapping) and _is_interval(sub):
            out[key + LOW], out[key + HIGH] = sub["low"], sub["high"]
    return out


def split_track(track: str, block: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    ci = block.get("ci") or {}
    head = [k for k in HEADLINE[track] if k != "ci"]
    ordered: dict[str, Any] = {}
    for key in HEADLINE[track]:
        if key == "ci":
            # The headline intervals, together, after the headline values.
            for name in head[:head.index("n")]:
                if _is_interval(ci.get(name)):
                    ordered[name + LOW], ordered[name + HIGH] = ci[name]["low"], ci[name]["high"]
        elif key in block:
            ordered[key] = block[key]
    rest = {k: v for k, v in block.items()
            if k not in HEADLINE[track] and k not in BREAKDOWN_KEYS[track]}
    rest_ci = {k: v for k, v in ci.items() if k not in head}
    ordered.update(_with_intervals(rest, rest_ci))
    breakdown = {k: block[k] for k in BREAKDOWN_KEYS[track] if k in block}
    return ordered, breakdown


def split(full: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """compute()'s block -> (metrics.json without its pointer, breakdown.json)."""
    metrics: dict[str, Any] = {}
    breakdown: dict[str, Any] = {}
    for key, value in full.items():
        if key in TRACKS:
            metrics[key], breakdown[key] = split_track(key, value)
        elif key == SAMPLE_KEY and isinstance(value, Mapping):
            metrics[key] = {k: v for k, v in value.items() if k not in SAMPLE_SPEC}
        elif key != POINTER_KEY:
            metrics[key] = value
    return metrics, breakdown


def sample_spec_of(full: Mapping[str, Any]) -> dict[str, Any]:
    """The part of compute()'s ``sample`` block that goes to provenance.json, not metrics.json."""
    sample = full.get(SAMPLE_KEY) or {}
    return {k: sample.get(k) for k in SAMPLE_SPEC}


def pointer(sha256: str, path: Path = PROVENANCE_PATH) -> list[str]:
    return [path.as_posix(), sha256]


def _unflatten_intervals(track: str, block: Mapping[str, Any], top: bool
                         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Inverse of :func:`_with_intervals`: (block without interval keys, its ci tree)."""
    out: dict[str, Any] = {}
    ci: dict[str, Any] = {}
    for key, value in block.items():
        if isinstance(value, Mapping):
            out[key], sub = _unflatten_intervals(track, value, False)
            if sub:
                ci[key] = sub
            continue
        for suffix, end in ((LOW, "low"), (HIGH, "high")):
            name = key[:-len(suffix)] if key.endswith(suffix) else None
            if top and track == TRACK_N and key == suffix[1:]:
                name = "accuracy"  # runs from before the uniform names: plain ci_low / ci_high
            if name:
                ci.setdefault(name, {})[end] = value
                break
        else:
            out[key] = value
    return out, ci


def join(metrics: Mapping[str, Any], breakdown: Mapping[str, Any] | None = None,
         provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The three files -> compute()'s nested block (``ci`` per track), plus the provenance."""
    full: dict[str, Any] = {}
    for key, value in metrics.items():
        if key in TRACKS and isinstance(value, Mapping):
            block, ci = _unflatten_intervals(key, value, True)
            extra = (breakdown or {}).get(key)
            # A metrics file from before the split has its "ci" block nested: kept as it is.
            full[key] = {**block, **(extra if isinstance(extra, Mapping) else {}),
                         "ci": {**(block.get("ci") or {}), **ci}}
        elif key != POINTER_KEY or isinstance(value, Mapping):
            # (a provenance block inside metrics.json: also from before the split)
            full[key] = value
    if provenance is not None:
        full["provenance"] = dict(provenance)
        spec = provenance.get(SAMPLE_KEY)
        if isinstance(spec, Mapping) and isinstance(full.get(SAMPLE_KEY), Mapping):
            full[SAMPLE_KEY] = {**full[SAMPLE_KEY], **spec}
    return full


def read_all(metrics_path: str | os.PathLike[str] = METRICS_PATH,
             breakdown_path: str | os.PathLike[str] | None = BREAKDOWN_PATH,
             provenance_path: str | os.PathLike[str] | None = PROVENANCE_PATH
             ) -> dict[str, Any]:
    """The joined block from the files on disk; an absent breakdown or provenance is left out."""
    def optional(path: str | os.PathLike[str] | None) -> dict[str, Any] | None:
        return read_object(path) if path is not None and Path(path).is_file() else None
    return join(read_object(metrics_path), optional(breakdown_path), optional(provenance_path))


def k_of(metrics: Mapping[str, Any]) -> int:
    """Samples per item, as the score stage recorded it in metrics.json (``k`` per track; 1 for
    a run from before k): the one reading of k every tool shares."""
    ks = [(metrics.get(t) or {}).get("k") for t in TRACKS]
    return max((int(k) for k in ks if isinstance(k, int | float) and k), default=1)


__all__ = [
    "BREAKDOWN_KEYS",
    "HEADLINE",
    "LEGACY_N",
    "POINTER_KEY",
    "SAMPLE_KEY",
    "SAMPLE_SPEC",
    "interval",
    "join",
    "k_of",
    "pointer",
    "read_all",
    "read_object",
    "sample_spec_of",
    "split",
    "split_track",
]
