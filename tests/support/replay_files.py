"""Replay files (``predict.replay.path``) built from the gold: chosen items wrong or missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rimo_eval.core.tracks import TRACK_N, TRACK_P

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
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
