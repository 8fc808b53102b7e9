"""A scored side of a comparison, made by the real replay predict and score stages on small
items (compare's tests, end to end and unit)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from rimo_eval.commands.compare.revisions import Side
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.run.revision import Revision
from rimo_eval.score.stage import SCORE_FILES, score
from tests.support.factories import params, predict_section, section, small_benchmark, write_items

BOOT = section(ScoreParams, "score", bootstrap={"samples": 100, "seed": 0, "confidence": 0.95})


def scored_side(root: Path, name: str, n_rows: list[dict], p_rows: list[dict],
                preds: list[tuple[str, str, Any]]) -> Side:
    """Run the real predict (replay) and score stages on small items; read what they wrote."""
    items = root / name / "items"
    write_items(items, n_rows, p_rows)
    replay = root / name / "replay.jsonl"
    replay.write_text("".join(json.dumps({"track": t, "problem_id": i, "prediction": p}) + "\n"
                              for t, i, p in preds))
    predict(predict_section(backend="replay", replay={"path": str(replay)}), items,
            root / name / "preds")
    metrics = score(BOOT, items, root / name / "preds", root / name / "scores",
                    root / name / "metrics.json", root / name / "plots")
    scores = {t: pd.read_parquet(root / name / "scores" / SCORE_FILES[t])
              for t in (TRACK_N, TRACK_P)}
    return Side(Revision(name, "git", "0" * 40), json.loads(json.dumps(metrics)), scores)


def run_score(root: Path, limit: int | None) -> dict:
    """oracle predictions over ``limit`` items per track, then the score stage, in ``root``."""
    if not (root / "items").is_dir():
        small_benchmark(root / "items")
    predict(predict_section({"backend": "oracle", "limit": limit}), root / "items", root / "preds")
    reports = root / "reports"
    return score(BOOT, root / "items", root / "preds", root / "scores",
                 reports / "metrics.json", reports / "plots",
                 params=params(predict={"backend": "oracle", "limit": limit,
                                        "sample_seed": 0}))
