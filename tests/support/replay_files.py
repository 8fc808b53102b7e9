"""Replay files (``predict.replay.path``) built from the gold: chosen items wrong or missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

ReplayRows = list[dict[str, Any]]


def replay_rows(gold_n: dict[str, str], gold_p: dict[str, list[str]], wrong_n: set[str],
                missing_n: set[str], wrong_p: set[str]) -> ReplayRows:
    rows: ReplayRows = []
    for pid, ans in gold_n.items():
        if pid not in missing_n:
            rows.append({"track": TRACK_N, "problem_id": pid,
                         "prediction": ans + "1" if pid in wrong_n else ans})
    for pid, sols in gold_p.items():
        pred = [*sols[:-1], "wrong"] if pid in wrong_p else list(sols)
        rows.append({"track": TRACK_P, "problem_id": pid, "prediction": pred})
    return rows


def write_jsonl(path: Path, rows: ReplayRows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def repo_gold(repo: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The gold answers in a repo's validated item tables (``dvc repro validate`` ran there):
    RIMO-N's answer per item, RIMO-P's sub-solutions per gradable item."""
    items_n = pd.read_parquet(repo / "data/items/rimo_n.parquet")
    items_p = pd.read_parquet(repo / "data/items/rimo_p.parquet")
    gold_n = dict(zip(items_n["problem_id"], items_n["answer"], strict=True))
    graded = items_p[items_p["gradable"]]
    return gold_n, {r.problem_id: list(r.sub_solutions) for r in graded.itertuples()}
