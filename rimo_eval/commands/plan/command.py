"""``rimo-eval plan``: what difference in RIMO-N accuracy a run of the configured size could
detect against another run, and what size a target difference needs (rimo_eval.stats.power;
docs/statistics.md, "Planning a run"). Reads ``predict.limit`` and ``predict.samples``; sends
nothing, writes nothing."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rimo_eval.artifacts.paths import items_path
from rimo_eval.errors import ConfigError
from rimo_eval.params.config import Params
from rimo_eval.rimo.tracks import TRACK_N
from rimo_eval.stats import power as P


def total_items() -> int:
    """RIMO-N's items: the validated table's rows where it is there, else the benchmark's."""
    path = items_path(TRACK_N)
    if path.exists():
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    from rimo_eval.validate.rules import EXPECTED_COUNTS  # here: it loads jsonschema

    return EXPECTED_COUNTS[TRACK_N]


def plan(n: int, k: int, psi: float, rho: float, alpha: float, target_power: float,
         target: float | None, total: int) -> dict[str, Any]:
    if not 0 < psi <= 1 or not 0 <= rho <= 1:
        raise ConfigError(f"plan: --discordance must be in (0, 1] and --rho in [0, 1], got "
                          f"{psi} and {rho}")
    if not 0 < alpha < 1 or not 0 < target_power < 1 or n < 1 or k < 1:
        raise ConfigError(f"plan: need items >= 1, k >= 1, --alpha and --power in (0, 1); got "
                          f"{n}, {k}, {alpha}, {target_power}")
    out: dict[str, Any] = {
        "items": n, "k": k, "total_items": total, "alpha": alpha, "power": target_power,
        "discordance": psi, "rho": rho if k > 1 else None,
        "test": "exact McNemar" if k == 1 else "paired test of per-item means, the normal "
                                               "approximation of compare's bootstrap",
        "min_detectable_difference": P.min_detectable(n, k, psi, rho, alpha, target_power)}
    if target is not None:
        if not 0 < target <= psi:
            raise ConfigError(f"plan: --target must be in (0, --discordance {psi}]: a run "
                              f"cannot win more items than it disagrees on; got {target}")
        out["target"] = {
            "difference": target,
            "items_needed": P.items_needed(target, k, psi, rho, alpha, target_power),
            "samples_needed": P.samples_needed(target, n, psi, rho, alpha, target_power)}
    return out


def render(r: dict[str, Any]) -> str:
    level = f"two-sided alpha = {r['alpha']:g}, power {r['power'] * 100:g}%"
    lines = [f"RIMO-N: {r['items']} of {r['total_items']} items, k = {r['k']}",
             f"Paired comparison against another run on the same items ({r['test']}), {level}.",
             f"Assumed: {r['discordance'] * 100:g}% of items right in one run and wrong in the "
             f"other (--discordance; `rimo-eval compare` shows yours: right in A only + right "
             f"in B only)" + (f"; samples of one item correlated at rho {r['rho']:g} (--rho)"
                              if r["k"] > 1 else "") + "."]
    mdd = r["min_detectable_difference"]
    lines.append(f"Minimum detectable difference in RIMO-N accuracy: {mdd * 100:.1f} points."
                 if mdd is not None else "No difference is detectable at this size: every "
                 "discordant item won would still not reach the power.")
    t = r.get("target")
    if t:
        items = t["items_needed"]
        n_text = ("more than a million items" if items is None else
                  f"{items} items at k = {r['k']}" + (f" (RIMO-N has {r['total_items']})"
                                                      if items > r["total_items"] else ""))
        k_text = ("no k up to 1024 on these items" if t["samples_needed"] is None else
                  f"k = {t['samples_needed']} on {r['items']} items")
        lines.append(f"For a difference of {t['difference'] * 100:g} points: {n_text}, or "
                     f"{k_text}.")
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace, params: Params | None) -> int:
    total = total_items()
    limit = params.predict.limit if params is not None else None
    n = args.items if args.items is not None else total if limit is None else min(limit, total)
    k = args.samples if args.samples is not None else (params.predict.samples if params else 1)
    result = plan(n, k, args.discordance, args.rho, args.alpha, args.power, args.target, total)
    print(json.dumps(result, indent=2) if args.json else render(result), end="\n"
          if args.json else "")
    return 0


__all__ = ["main", "plan", "render", "total_items"]
