"""Two runs over different items (a sample against the full run): compare on the items both have.

A difference and its paired interval mean something only over one set of items. When the two
runs' item sets differ, each side is cut down to the items both evaluated (same problem_id and
item hash) and its metrics are recomputed there with the score stage's own ``compute`` (the
opt-in judge's with its own ``judge_metrics``), so the A and B columns, every delta, every
interval and every test of the comparison are over the same items. The output's first lines say
how many items were shared and how many only one run had; ``--strict`` refuses such a pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.artifacts import judge_record
from rimo_eval.commands.compare.revisions import Side
from rimo_eval.errors import DataError
from rimo_eval.judge.metrics import judge_block, judge_metrics
from rimo_eval.rimo.tracks import TRACK_P, TRACKS
from rimo_eval.score.metrics import compute
from rimo_eval.score.samples import with_sample

Key = tuple[str, str]  # (problem_id, item_hash): an item as a run answered it
# The recomputed side's own intervals are not shown by compare (its intervals are the paired
# ones), so none are drawn.
NO_INTERVALS = {"samples": 0, "seed": 0, "confidence": 0.95}


def item_keys(scores: pd.DataFrame) -> set[Key]:
    """The items a scores table covers (its first sample's rows)."""
    first = with_sample(scores)
    first = first[first["sample"] == 0]
    return set(zip(first["problem_id"].astype(str), first["item_hash"].astype(str),
                   strict=True))


def overlap(a: Mapping[str, pd.DataFrame], b: Mapping[str, pd.DataFrame]
            ) -> dict[str, dict[str, Any]]:
    """Per track: how many items both runs have (``keys``: which), and the ids only one has
    or whose content (item hash) differs between them."""
    out = {}
    for t in TRACKS:
        ka, kb = item_keys(a[t]), item_keys(b[t])
        ids_a, ids_b = {i for i, _ in ka}, {i for i, _ in kb}
        out[t] = {"shared": len(ka & kb), "keys": ka & kb, "only_a": sorted(ids_a - ids_b),
                  "only_b": sorted(ids_b - ids_a),
                  "changed_items": sorted({i for i, _ in ka ^ kb} & ids_a & ids_b)}
    return out


def same_items(sets: Mapping[str, Mapping[str, Any]]) -> bool:
    return not any(s["only_a"] or s["only_b"] or s["changed_items"] for s in sets.values())


def describe(sets: Mapping[str, Mapping[str, Any]]) -> str:
    """``RIMO-N: 5 shared, 330 only in A, 0 only in B; RIMO-P: ...`` (changed items when any)."""
    parts = []
    for t, s in sets.items():
        changed = (f", {len(s['changed_items'])} with other contents in A and B"
                   if s["changed_items"] else "")
        parts.append(f"{t}: {s['shared']} shared, {len(s['only_a'])} only in A, "
                     f"{len(s['only_b'])} only in B{changed}")
    return "; ".join(parts)


def require_same_items(sets: Mapping[str, Mapping[str, Any]], a: str, b: str) -> None:
    """``--strict``: a pair over different items is refused, as the leaderboard refuses it."""
    if not same_items(sets):
        raise DataError(f"{a} and {b} are not comparable: different items ({describe(sets)}). "
                        f"Compare runs over the same items (predict.limit, "
                        f"predict.sample_seed), or leave out --strict to compare on the "
                        f"shared items only.")


def _keep(frame: pd.DataFrame, keys: set[Key]) -> pd.DataFrame:
    pairs = zip(frame["problem_id"].astype(str), frame["item_hash"].astype(str), strict=True)
    mask = np.fromiter((p in keys for p in pairs), dtype=bool, count=len(frame))
    return frame.loc[mask].reset_index(drop=True)


def _judge_on(side: Side, ids: set[str]) -> dict[str, Any]:
    """The judge record recomputed on the shared RIMO-P items; no record (no judge rows)
    when the judge ran but its table could not be read."""
    block = judge_block(side.judge)
    if block is None:
        return dict(side.judge)
    if side.judge_table is None:
        return {}
    table = side.judge_table[side.judge_table["problem_id"].astype(str).isin(ids)]
    fresh = {**judge_metrics(table.reset_index(drop=True), NO_INTERVALS),
             **{k: block.get(k) for k in judge_record.FACTS}}
    return {"enabled": True, TRACK_P: {"judge": fresh}}


def on_shared(side: Side, keys: Mapping[str, set[Key]]) -> Side:
    """``side`` over the items in ``keys`` only, its metrics recomputed as the score stage
    computes them (k-sample keys and usage too where its predictions were read), with the
    side's own predict and score sections."""
    scores = {t: _keep(with_sample(side.scores[t]), keys[t]) for t in TRACKS}
    preds = None
    if side.predictions is not None:
        preds = {t: _keep(side.predictions[t], keys[t]) for t in TRACKS}
    sample = side.metrics.get("sample") or {}
    totals = {t: (sample.get("total") or {}).get(t, len(item_keys(side.scores[t])))
              for t in TRACKS}
    metrics = compute(scores, totals, NO_INTERVALS,
                      {"limit": sample.get("limit"), "seed": sample.get("seed")}, preds,
                      side.predict, side.score)
    metrics["provenance"] = side.metrics.get("provenance")
    ids = {i for i, _ in keys[TRACK_P]}
    return Side(side.revision, metrics, scores, _judge_on(side, ids), model=side.model,
                predict=side.predict, score=side.score)


__all__ = ["NO_INTERVALS", "describe", "item_keys", "on_shared", "overlap",
           "require_same_items", "same_items"]
