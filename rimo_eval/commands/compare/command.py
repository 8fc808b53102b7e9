"""``rimo-eval compare A B``: two revisions, branches or DVC experiments side by side.

Each side is read through DVC at its revision (revisions), paired item by item and tested
(pairing), and rendered as Markdown, JSON or HTML (render). The intervals use params
``score.bootstrap`` (samples, seed, confidence) when a params file is there, so compare and the
score stage resample alike; ``--samples``, ``--seed`` and ``--confidence`` override it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rimo_eval.artifacts.paths import JUDGE_TABLE, scores_path
from rimo_eval.commands.compare.arguments import FLIPS
from rimo_eval.commands.compare.details import attach_p_texts
from rimo_eval.commands.compare.pairing import (
    compare_sides,
    compare_track,
    flips,
    metric_rows,
    pair,
)
from rimo_eval.commands.compare.render import TOOL, render_html, render_markdown
from rimo_eval.commands.compare.revisions import Side, load_side
from rimo_eval.commands.compare.shared_items import (
    describe,
    overlap,
    require_same_items,
    same_items,
)
from rimo_eval.errors import DataError
from rimo_eval.io.outputs import claim_file, html_ours, output_file
from rimo_eval.judge.metrics import judge_block
from rimo_eval.params.config import Params, ScoreParams
from rimo_eval.rimo.tracks import TRACK_P, TRACKS
from rimo_eval.run.reader import RunReader
from rimo_eval.run.record import Run
from rimo_eval.run.revision import WORKSPACE, Revision
from rimo_eval.stats import bootstrap_params

HTML_OPTION = "compare --html"


def bootstrap_settings(score: ScoreParams | None, args: argparse.Namespace) -> dict[str, Any]:
    """params ``score.bootstrap`` (or its defaults), each given option overriding its key."""
    boot = bootstrap_params(score)
    for key in ("samples", "seed", "confidence"):
        value = getattr(args, key, None)
        if value is not None:
            boot[key] = value
    return boot


def _optional(read: Callable[[], Any]) -> Any:
    """A file a comparison can do without (not in the cache, an older run): None."""
    try:
        return read()
    except (DataError, OSError, ValueError, yaml.YAMLError):
        return None


def run_extras(run: Run) -> dict[str, Any]:
    """What a flip and the params diff need beyond the scores: the params file, RIMO-P's
    predictions and items. Each is optional: compare works on the scores alone."""
    return {"params": dict(run.params) or None,
            "predictions": _optional(lambda: run.predictions(
                TRACK_P, ["problem_id", "sample", "prediction"])),
            "items": _optional(lambda: run.items(TRACK_P, ["problem_id", "sub_solutions"]))}


# What usage and the k-sample metrics read from a predictions table (no texts).
PREDICTION_COLUMNS = ["problem_id", "sample", "item_hash", "status", "details", "backend"]


def shared_inputs(run: Run, side: Side) -> Side:
    """``side`` with what recomputing its metrics on the shared items reads beyond the scores:
    its predictions (usage, k-sample keys) and, where the judge ran, the judge table. Each is
    optional; what cannot be read is left out of the recomputed metrics."""
    side.predictions = _optional(lambda: {t: run.predictions(t, PREDICTION_COLUMNS)
                                          for t in TRACKS})
    if judge_block(side.judge) is not None:
        side.judge_table = _optional(lambda: run.table(JUDGE_TABLE))
    return side


def compare(root: Path, a: str, b: str, samples: int = 1000, seed: int = 0,
            confidence: float = 0.95, strict: bool = False) -> dict[str, Any]:
    # One DVC repository handle; one index per revision, for the check and every read.
    with RunReader(root) as reader:
        revisions = [reader.resolve(name) for name in (a, b)]
        for r in revisions:  # name every absent table and what brings it back before reading
            reader.require(r, [scores_path(t) for t in TRACKS])
        runs = [reader.open(r) for r in revisions]
        sides = [load_side(run) for run in runs]
        sets = overlap(sides[0].scores, sides[1].scores)
        if not same_items(sets):
            if strict:
                require_same_items(sets, a, b)
            print(f"compare: {a} and {b} evaluated different items ({describe(sets)}); "
                  f"comparing on the shared items only", file=sys.stderr)
            sides = [shared_inputs(r, s) for r, s in zip(runs, sides, strict=True)]
        extras = [run_extras(r) for r in runs]
    result = compare_sides(sides[0], sides[1], samples=samples, seed=seed, confidence=confidence,
                           params=(extras[0]["params"], extras[1]["params"]))
    attach_p_texts(result["tracks"][TRACK_P]["flips"], extras[0]["items"],
                   extras[0]["predictions"], extras[1]["predictions"])
    return result


def main(args: argparse.Namespace, params: Params | None) -> int:
    """``params`` may be None: compare needs no params file (each side carries its own)."""
    boot = bootstrap_settings(None if params is None else params.score, args)
    if args.html:  # refused before the work, not after
        claim_file(args.html, TOOL, HTML_OPTION, html_ours(TOOL))
    result = compare(Path("."), args.a, args.b, **boot, strict=getattr(args, "strict", False))
    cap = None if getattr(args, "all_flips", False) else getattr(args, "flips", None) or FLIPS
    if args.html:
        with output_file(args.html, TOOL, HTML_OPTION, html_ours(TOOL)) as tmp:
            tmp.write_text(render_html(result, cap), encoding="utf-8")
        print(f"compare: wrote {args.html}", file=sys.stderr)
    if args.json:  # every flip: the cap is for reading, not for machines
        print(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        print(render_markdown(result, cap), end="")
    return 0


__all__ = ["WORKSPACE", "Revision", "Side", "bootstrap_settings", "compare", "compare_sides",
           "compare_track", "flips", "load_side", "main", "metric_rows", "pair", "render_html",
           "render_markdown"]
