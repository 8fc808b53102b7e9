"""``rimo-eval judge --calibrate``: how far the judge can be trusted, measured on known answers.

* True-positive rate: each item's own reference sub-solutions, judged against that item. A sound
  judge calls them correct.
* False-positive rate: each item judged with the reference sub-solutions of another item with
  the same number of parts (a seeded derangement: nobody keeps their own). A sound judge calls
  them incorrect.

Rates are over parts; ``unparsable``, ``error`` and missing verdicts count as "not correct" in
both. Writes ``reports/judge_calibration.json`` (git-tracked, read by the report).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.items import ITEMS_DIR, Item, load_items
from rimo_eval.artifacts.paths import JUDGE_CALIBRATION_PATH
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.io.atomic import write_json
from rimo_eval.io.hashing import sha256_bytes
from rimo_eval.judge import chat
from rimo_eval.judge.judging import Job, judge_fingerprint, judge_jobs
from rimo_eval.judge.metrics import ERROR, MISSING
from rimo_eval.judge.parse import CORRECT, UNPARSABLE
from rimo_eval.params.config import Params
from rimo_eval.rimo.tracks import TRACK_P


def derangement(items: Sequence[Item], seed: int) -> dict[str, str]:
    """problem_id -> the item whose sub-solutions it is given; only same-size groups mix.

    Each group (same number of parts, at least two items) is shuffled with its own seeded
    generator and every item takes the next one's solutions: a cycle, so no fixed point.
    """
    groups: dict[int, list[str]] = {}
    for it in items:
        groups.setdefault(it.number_of_parts, []).append(it.problem_id)
    pairs: dict[str, str] = {}
    for parts, ids in sorted(groups.items()):
        if len(ids) < 2:
            continue
        order = sorted(ids)
        random.Random(f"{seed}:{parts}").shuffle(order)
        pairs.update({pid: order[(i + 1) % len(order)] for i, pid in enumerate(order)})
    return dict(sorted(pairs.items()))


def select(items: Sequence[Item], limit: Any, seed: int) -> list[Item]:
    """Gradable items, the first ``limit`` of a seeded hash order (null: all)."""
    gradable = [it for it in items if it.gradable and it.number_of_parts > 0]
    if limit is None:
        return sorted(gradable, key=lambda it: it.problem_id)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"params.yaml: judge.calibration.limit must be null or an integer "
                          f">= 1, got {limit!r}")
    ranked = sorted(gradable, key=lambda it: sha256_bytes(f"{seed}:{it.problem_id}".encode()))
    return sorted(ranked[:limit], key=lambda it: it.problem_id)


def _rate(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    correct = sum(v["verdict"] == CORRECT for v in verdicts)
    return {"parts": len(verdicts), "judged_correct": correct,
            "rate": round(correct / len(verdicts), 6) if verdicts else None,
            "unparsable": sum(v["verdict"] == UNPARSABLE for v in verdicts),
            "errors": sum(v["verdict"] == ERROR for v in verdicts),
            "missing": sum(v["verdict"] == MISSING for v in verdicts)}


def calibrate(params: Params, items_dir: Path = ITEMS_DIR,
              out_path: Path = JUDGE_CALIBRATION_PATH) -> dict[str, Any]:
    cfg = params.judge
    chat.check(cfg)  # configuration errors first (calibration runs even if not enabled)
    seed, limit = cfg.calibration.seed, cfg.calibration.limit
    chosen = select(load_items(TRACK_P, items_dir), limit, seed)
    if not chosen:
        raise DataError(f"{items_dir}: no gradable RIMO-P items to calibrate on")
    by_id = {it.problem_id: it for it in chosen}
    pairs = derangement(chosen, seed)
    jobs = [Job(it.problem, it.sub_solutions, k, it.sub_solutions[k])
            for it in chosen for k in range(it.number_of_parts)]
    n_ref = len(jobs)
    jobs += [Job(it.problem, it.sub_solutions, k, by_id[pairs[it.problem_id]].sub_solutions[k])
             for it in chosen if it.problem_id in pairs for k in range(it.number_of_parts)]
    verdicts = judge_jobs(cfg, jobs, label="judge --calibrate")
    refs, swapped = _rate(verdicts[:n_ref]), _rate(verdicts[n_ref:])
    result = {
        "calibrated": True,
        "model": cfg.model, "fingerprint": judge_fingerprint(cfg),
        "seed": seed, "limit": limit, "items": len(chosen),
        "true_positive_rate": refs["rate"], "false_positive_rate": swapped["rate"],
        "references": refs,
        "swapped": {**swapped, "items": len(pairs),
                    "unpaired": sorted(set(by_id) - set(pairs))},  # alone in their part count
        "pairs": pairs,
    }
    write_json(out_path, result)
    return result


def run(params: Params) -> None:
    r = calibrate(params)
    print(f"judge --calibrate: true-positive rate {r['true_positive_rate']} on "
          f"{r['references']['parts']} reference parts, false-positive rate "
          f"{r['false_positive_rate']} on {r['swapped']['parts']} swapped parts; wrote "
          f"{JUDGE_CALIBRATION_PATH}", file=sys.stderr)
