"""Pairing two sides item by item, the paired tests, and the metric table.

Items are paired by (problem_id, item hash), which makes the tests paired: exact McNemar on
the discordant pairs of RIMO-N ``correct`` and RIMO-P ``strict``, and the seeded bootstrap of
rimo_eval.stats (items resampled jointly for A and B) for the delta of every rate metric.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.artifacts.flat_keys import flatten
from rimo_eval.artifacts.items import DOMAINS
from rimo_eval.artifacts.numbers import rounded
from rimo_eval.commands.compare.details import n_flip_fields, p_flip_fields, params_diff
from rimo_eval.commands.compare.revisions import Side
from rimo_eval.commands.compare.samples import (
    as_mean_at_k,
    maj_mcnemar,
    mcnemar_test,
    mean_test,
    per_item,
    sample_count,
    which_test,
)
from rimo_eval.commands.compare.shared_items import describe, on_shared, overlap, same_items
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.io.parquet import records
from rimo_eval.judge.metrics import compare_rows as judge_rows
from rimo_eval.rimo.tracks import HEADLINE, TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.samples import with_sample
from rimo_eval.stats import bootstrap
from rimo_eval.stats.floors import floor_line

TESTED = {TRACK_N: "correct", TRACK_P: "strict"}
# Numerator in A, numerator in B, denominator: every rate metric is a ratio of per-item sums.
PairedRatio = tuple[np.ndarray, np.ndarray, np.ndarray]


def ratio_delta(spec: PairedRatio) -> float | None:
    """sum(B - A) / sum(den): the statistic the paired bootstrap resamples, on every item."""
    num_a, num_b, den = spec
    total = float(den.sum())
    return None if total == 0 else float((num_b - num_a).sum()) / total


def paired_values(spec: PairedRatio) -> dict[str, float | None]:
    """A, B and B - A of one rate metric, all over the paired items (the interval's items)."""
    num_a, num_b, den = spec
    total = float(den.sum())
    return {"a": None if total == 0 else rounded(float(num_a.sum()) / total),
            "b": None if total == 0 else rounded(float(num_b.sum()) / total),
            "delta": rounded(ratio_delta(spec))}


def _domain(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def pair(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Inner join on (problem_id, item_hash): an item whose content changed between A and B is
    a different question, so it is reported, not paired."""
    for side, frame in (("A", a), ("B", b)):
        dup = sorted(set(frame["problem_id"][frame["problem_id"].duplicated()]))
        if dup:
            raise DataError(f"scores of {side}: duplicate problem_id {dup[:10]}: not a table "
                            f"the score stage writes")
    merged = a.merge(b, on=["problem_id", "item_hash"], suffixes=("_a", "_b"), how="inner",
                     validate="one_to_one")
    ids_a, ids_b = set(a["problem_id"]), set(b["problem_id"])
    changed = sorted((ids_a & ids_b) - set(merged["problem_id"]))
    unpaired = {"only_a": sorted(ids_a - ids_b), "only_b": sorted(ids_b - ids_a),
                "changed_items": changed}
    return merged.sort_values("problem_id", kind="stable").reset_index(drop=True), unpaired


def _f(frame: pd.DataFrame, col: str) -> np.ndarray:
    return frame[col].to_numpy(dtype=float)


def ratio_specs(track: str, paired: pd.DataFrame) -> dict[str, PairedRatio]:
    """Every rate metric of metrics.json as a ratio of per-item sums, named like its key."""
    specs: dict[str, PairedRatio] = {}
    n = len(paired)
    ones = np.ones(n)
    if track == TRACK_N:
        ca, cb = _f(paired, "correct_a"), _f(paired, "correct_b")
        specs[f"{TRACK_N}.accuracy"] = (ca, cb, ones)
        domains = paired["domain_a"].map(_domain) if n else pd.Series(dtype=object)
        for d in DOMAINS:
            mask = (domains == d).to_numpy(dtype=float)
            if mask.any():
                specs[f"{TRACK_N}.by_domain.{d}"] = (ca * mask, cb * mask, mask)
        return specs
    cols = {"strict": ("strict", None), "sub_problem_accuracy": ("n_matched", "number_of_parts"),
            "prefix_score": ("prefix_score", None)}
    parts = paired["number_of_parts_a"].to_numpy(dtype=float) if n else np.zeros(0)

    def add(prefix: str, mask: np.ndarray) -> None:
        for name, (num, den) in cols.items():
            d = parts * mask if den else mask
            specs[f"{prefix}{name}"] = (_f(paired, f"{num}_a") * mask,
                                        _f(paired, f"{num}_b") * mask, d)

    add(f"{TRACK_P}.", ones)
    for k in sorted({int(x) for x in parts}):
        add(f"{TRACK_P}.by_parts.{k}.", (parts == k).astype(float))
    return specs


def flips(track: str, paired: pd.DataFrame) -> list[dict[str, Any]]:
    col = TESTED[track]
    out = []
    for r in records(paired):
        a, b = bool(r[f"{col}_a"]), bool(r[f"{col}_b"])
        if a != b:
            row = {"problem_id": r["problem_id"], "domain": _domain(r["domain_a"]), "a": a,
                   "b": b}
            if track == TRACK_P:
                row["parts"] = int(r["number_of_parts_a"])
                row.update(p_flip_fields(r))
            else:
                row.update(n_flip_fields(r))
            out.append(row)
    return out


def compare_track(track: str, a: pd.DataFrame, b: pd.DataFrame, samples: int, seed: int,
                  confidence: float) -> dict[str, Any]:
    k = {"a": sample_count(a), "b": sample_count(b)}
    paired, unpaired = pair(per_item(track, a), per_item(track, b))
    if track == TRACK_P:
        # strict and the other RIMO-P rates are defined over gradable items only.
        paired = paired[paired["gradable_a"].astype(bool)].reset_index(drop=True)
    specs = ratio_specs(track, paired)
    # The delta's numerator is per item B - A: one resample draw covers both sides.
    intervals = bootstrap({name: (nb - na, den) for name, (na, nb, den) in specs.items()},
                          samples, seed, confidence)
    col = TESTED[track]
    if max(k.values()) > 1:  # per-item means are not 0/1: see rimo_eval/commands/compare/samples.py
        specs, intervals = as_mean_at_k(track, specs), as_mean_at_k(track, intervals)
        return {"paired": len(paired), **unpaired, "k": k, "note": which_test(k),
                "test": mean_test(col, paired, k, samples, seed, confidence),
                "maj_test": maj_mcnemar(paired),
                "deltas": {name: {**paired_values(s), "ci": intervals[name]}
                           for name, s in specs.items()},
                "flips": []}
    return {
        "paired": len(paired),
        **unpaired,
        "k": k, "note": which_test(k),
        "test": mcnemar_test(col, paired[f"{col}_a"].to_numpy(), paired[f"{col}_b"].to_numpy()),
        "deltas": {name: {**paired_values(s), "ci": intervals[name]}
                   for name, s in specs.items()},
        "flips": flips(track, paired),
    }


# --- the metric table --------------------------------------------------------------------------


def _table_keys(metrics: Mapping[str, Any]) -> dict[str, Any]:
    # Each side's own intervals and the provenance are not quantities to subtract.
    keep = {k: v for k, v in metrics.items() if k in TRACKS or k == "sample"}
    # The floor is context with a section of its own (floor_context), not a count to subtract.
    keep = {k: {m: x for m, x in v.items() if m != "baselines"} if k == TRACK_N
            and isinstance(v, Mapping) else v for k, v in keep.items()}
    return {k: v for k, v in flatten(keep).items()
            if ".ci." not in k and ".by_domain_ci." not in k and not k.endswith(("_ci_low",
                                                                               "_ci_high"))
            and not isinstance(v, bool | Mapping)}


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def metric_rows(ma: Mapping[str, Any], mb: Mapping[str, Any],
                deltas: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per metric. A rate metric with a paired interval takes A, B and Δ from the
    paired items, the interval's own items (rimo_eval.commands.compare.shared_items makes both
    runs' items the same ones first); every other row is B - A of the two metrics blocks."""
    fa, fb = _table_keys(ma), _table_keys(mb)
    names = [*fa, *(k for k in fb if k not in fa), *(k for k in deltas
                                                     if k not in fa and k not in fb)]

    spec_pos = {name: k for k, name in enumerate(deltas)}

    def order(item: tuple[int, str]) -> tuple[int, int, int]:
        # Per track: headline metrics, then the other rates in spec order, then the counts.
        pos, name = item
        head, _, rest = name.partition(".")
        track = TRACKS.index(head) if head in TRACKS else len(TRACKS)
        headline = HEADLINE.get(head, ())
        if rest in headline:
            return (track, headline.index(rest), 0)
        if name in spec_pos:
            return (track, len(headline), spec_pos[name])
        return (track, len(headline) + 1, pos)

    rows = []
    for _, name in sorted(enumerate(names), key=order):
        d = deltas.get(name)
        if d is not None:
            rows.append({"name": name, "a": d["a"], "b": d["b"], "rate": True,
                         "delta": d["delta"], "ci": d["ci"]})
            continue
        a: Any = fa.get(name)  # JSON values, numbers or not
        b: Any = fb.get(name)
        rows.append({"name": name, "a": a, "b": b, "rate": False,
                     "delta": round(b - a, 6) if _number(a) and _number(b) else None,
                     "ci": None})
    return rows


def floor_context(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """One side's RIMO-N floor line and answer types, over the compared items (context beside
    the metrics, never a metric: breakdown.json ``baselines`` and ``by_answer_type``)."""
    n = metrics.get(TRACK_N) or {}
    return {"line": floor_line(TRACK_N, n.get("accuracy"), n.get("baselines")),
            "best_constant": (n.get("baselines") or {}).get("best_constant"),
            "by_answer_type": n.get("by_answer_type")}


def _check_unique(side: str, frame: pd.DataFrame) -> None:
    keys = with_sample(frame)[["problem_id", "sample"]]
    dup = sorted(set(keys["problem_id"][keys.duplicated()]))
    if dup:
        raise DataError(f"scores of {side}: duplicate problem_id {dup[:10]}: not a table the "
                        f"score stage writes")


def compare_sides(a: Side, b: Side, samples: int = 1000, seed: int = 0,
                  confidence: float = 0.95,
                  params: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]
                  = (None, None)) -> dict[str, Any]:
    """The comparison; ``params`` is each side's params.yaml as it stands (None: not known),
    diffed.

    Over the items both runs evaluated: when their item sets differ, both sides are first cut
    down to the shared items and their metrics recomputed there (compare.shared_items), so every
    value, delta, interval and test is over the same items; ``items`` says how many."""
    if samples < 0 or not 0 < confidence < 1:
        raise ConfigError(f"compare: bootstrap samples must be >= 0 and confidence in (0, 1), "
                          f"got samples={samples}, confidence={confidence}")
    for name, side in (("A", a), ("B", b)):
        for t in TRACKS:
            _check_unique(name, side.scores[t])
    sets = overlap(a.scores, b.scores)
    same = same_items(sets)
    if not same:
        keys = {t: sets[t]["keys"] for t in TRACKS}
        a, b = on_shared(a, keys), on_shared(b, keys)
    tracks = {t: {**compare_track(t, a.scores[t], b.scores[t], samples, seed, confidence),
                  **{k: sets[t][k] for k in ("only_a", "only_b", "changed_items")}}
              for t in TRACKS}
    deltas = {name: d for t in TRACKS for name, d in tracks[t]["deltas"].items()}
    return {
        "a": a.summary(), "b": b.summary(),
        "items": {"same": same, "note": None if same else describe(sets),
                  **{t: {"shared": sets[t]["shared"], "only_a": len(sets[t]["only_a"]),
                         "only_b": len(sets[t]["only_b"]),
                         "changed_items": len(sets[t]["changed_items"])} for t in TRACKS}},
        "bootstrap": {"samples": samples, "seed": seed, "confidence": confidence},
        "metrics": metric_rows(a.metrics, b.metrics, deltas) + judge_rows(a.judge, b.judge),
        "floors": {"a": floor_context(a.metrics), "b": floor_context(b.metrics)},
        "params_diff": params_diff(*params),
        "tracks": tracks,
    }


__all__ = ["TESTED", "PairedRatio", "compare_sides", "compare_track", "flips", "floor_context",
           "metric_rows",
           "pair", "paired_values", "ratio_delta", "ratio_specs"]
