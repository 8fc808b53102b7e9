"""The report's "cost and budget" section: requests, tokens, cost, truncations, k samples.

Read from metrics.json only (the score stage's ``<track>.usage`` block), so the numbers are the
deterministic ones; run-dependent facts (cache hits, wall time) are in reports/predict_run.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from rimo_eval.artifacts.numbers import pct
from rimo_eval.rimo.tracks import TRACKS

COST_COLUMNS = ["track", "items", "samples per item", "requests", "prompt tokens",
                "completion tokens", "reasoning tokens", "reasoning tokens per item",
                "truncated replies", "share truncated", "context-length errors", "cost (USD)"]


def _share(num: float, den: float) -> float | None:
    return num / den if den else None


def _per_item(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _row(track: str, items: int, k: int, u: Mapping[str, Any]) -> dict[str, Any]:
    replies = items * k
    cost = u.get("cost_usd")
    return {
        "track": track, "items": items, "samples per item": k,
        "requests": int(u.get("requests", 0)),
        "prompt tokens": int(u.get("prompt_tokens", 0)),
        "completion tokens": int(u.get("completion_tokens", 0)),
        "reasoning tokens": int(u.get("reasoning_tokens", 0)),
        # Per item, over its k samples: what one question costs in thinking.
        "reasoning tokens per item": _per_item(_share(u.get("reasoning_tokens", 0), items)),
        "truncated replies": int(u.get("truncated", 0)),
        "share truncated": pct(_share(u.get("truncated", 0), replies)),
        "context-length errors": int(u.get("context_errors", 0)),
        "cost (USD)": "not priced" if cost is None else f"{float(cost):.4f}",
    }


def cost_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """One row per track and a total; 'not priced' without the backend's price_per_mtok."""
    evaluated = (metrics.get("sample") or {}).get("evaluated") or {}
    rows = []
    for track in TRACKS:
        block = metrics.get(track) or {}
        rows.append(_row(track, int(evaluated.get(track, block.get("n", 0))),
                         int(block.get("k", 1)), block.get("usage") or {}))
    if not rows:
        return pd.DataFrame(columns=COST_COLUMNS)
    total: dict[str, Any] = {"track": "total", "items": sum(r["items"] for r in rows),
                             "samples per item": max(r["samples per item"] for r in rows)}
    for col in ("requests", "prompt tokens", "completion tokens", "reasoning tokens",
                "truncated replies", "context-length errors"):
        total[col] = sum(r[col] for r in rows)
    total["reasoning tokens per item"] = _per_item(_share(total["reasoning tokens"],
                                                          total["items"]))
    replies = sum(r["items"] * r["samples per item"] for r in rows)
    total["share truncated"] = pct(_share(total["truncated replies"], replies))
    costs = [float(r["cost (USD)"]) for r in rows if r["cost (USD)"] != "not priced"]
    total["cost (USD)"] = f"{sum(costs):.4f}" if costs else "not priced"
    return pd.DataFrame([*rows, total], columns=COST_COLUMNS)


def samples_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """The k-sample metrics (mean@k, pass@k, maj@k); empty for a k = 1 run."""
    rows = []
    for track in TRACKS:
        block = metrics.get(track) or {}
        if int(block.get("k", 1)) <= 1:
            continue
        for name, value in sorted(_flat(block, ("mean_at_k", "pass_at_k", "pass_at",
                                                "maj_at_k")).items()):
            rows.append({"metric": f"{track}.{name}", "k": block["k"], "value": value})
    return pd.DataFrame(rows, columns=["metric", "k", "value"])


def _flat(block: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        value = block.get(key)
        if isinstance(value, Mapping):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        elif value is not None:
            out[key] = value
    return out
