"""compare with k samples per item: paired on per-item means, a bootstrap test, McNemar on maj@k."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rimo_eval.commands.compare.command import Revision, Side, compare_sides, render_markdown
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.stage import SCORE_FILES, score
from tests.support.factories import predict_section, section, small_benchmark


def side(root: Path, name: str, k: int, rows: list[tuple[str, str, int, Any]]) -> Side:
    """The real replay predict and score stages with predict.samples = k."""
    small_benchmark(root / "items")
    replay = root / f"{name}.jsonl"
    replay.write_text("".join(json.dumps({"track": t, "problem_id": i, "sample": j,
                                          "prediction": p}) + "\n" for t, i, j, p in rows))
    predict(predict_section({"backend": "replay", "samples": k, "replay": {"path": str(replay)}}),
            root / "items", root / name / "preds")
    metrics = score(section(ScoreParams, "score",
                            bootstrap={"samples": 100, "seed": 0, "confidence": 0.95}),
                    root / "items", root / name / "preds", root / name / "scores",
                    root / name / "m.json", root / name / "plots")
    scores = {t: pd.read_parquet(root / name / "scores" / SCORE_FILES[t])
              for t in (TRACK_N, TRACK_P)}
    return Side(Revision(name, "git", "0" * 40), json.loads(json.dumps(metrics)), scores)


def test_k_samples_pair_items_on_their_mean(tmp_path: Path) -> None:
    # Gold: 2001a1 12, 2001a2 -3, 2001c1 7, 2001c2 100. Per-item means in A: 1, 0.5, 0, 0;
    # in B: 1, 1, 0.5, 0.
    a = side(tmp_path, "a", 2, [
        (TRACK_N, "2001a1", 0, "12"), (TRACK_N, "2001a1", 1, "12"),
        (TRACK_N, "2001a2", 0, "-3"), (TRACK_N, "2001a2", 1, "3"),
        (TRACK_N, "2001c1", 0, "1"), (TRACK_P, "2001a1", 0, ["s1"])])
    b = side(tmp_path, "b", 2, [
        (TRACK_N, "2001a1", 0, "12"), (TRACK_N, "2001a1", 1, "12"),
        (TRACK_N, "2001a2", 0, "-3"), (TRACK_N, "2001a2", 1, "-3"),
        (TRACK_N, "2001c1", 0, "0"), (TRACK_N, "2001c1", 1, "7"),
        (TRACK_P, "2001a1", 1, ["s1"])])
    result = compare_sides(a, b, samples=300, seed=2)
    n = result["tracks"][TRACK_N]
    assert n["k"] == {"a": 2, "b": 2} and n["paired"] == 4
    assert n["test"]["name"] == "paired bootstrap on the per-item mean over samples"
    assert n["test"]["metric"] == "mean_at_k.correct"
    assert (n["test"]["right_in_a_only"], n["test"]["right_in_b_only"]) == (0, 2)
    assert n["test"]["delta"] == pytest.approx((1 + 1 + 0.5 + 0 - 1 - 0.5) / 4)
    assert 0 < n["test"]["p_value"] <= 1
    rows = {r["name"]: r for r in result["metrics"]}
    # The paired delta and its interval belong to mean@k, not to the sample-0 accuracy.
    mean = rows["RIMO-N.mean_at_k.accuracy"]
    assert mean["delta"] == pytest.approx(1 / 4)
    assert (mean["a"], mean["b"]) == (pytest.approx(1.5 / 4), pytest.approx(2.5 / 4))
    assert mean["rate"] and mean["ci"]["low"] <= 1 / 4 <= mean["ci"]["high"]
    assert rows["RIMO-N.accuracy"]["ci"] is None
    assert rows["RIMO-P.mean_at_k.sub_problem_accuracy"]["rate"]
    # maj@k is 0/1, so McNemar applies to it. 2001a2 in A: "-3" vs "3", a tie to the earliest,
    # right; 2001c1 in B: "0" vs "7", a tie to "0", wrong. So no item changes its majority.
    maj = n["maj_test"]
    assert maj["name"] == "exact McNemar" and maj["metric"] == "maj_at_k"
    assert (maj["right_in_a_only"], maj["right_in_b_only"], maj["both_right"]) == (0, 0, 2)
    assert n["flips"] == []
    p = result["tracks"][TRACK_P]
    assert p["test"]["metric"] == "mean_at_k.strict" and p["test"]["delta"] == 0.0
    md = render_markdown(result)
    assert "items paired on their per-item mean over samples" in md
    assert "McNemar needs a 0/1 outcome" in md
    assert "exact McNemar on maj_at_k" in md


def test_k1_keeps_mcnemar_and_says_so(tmp_path: Path) -> None:
    a = side(tmp_path, "a", 1, [(TRACK_N, "2001a1", 0, "12")])
    b = side(tmp_path, "b", 1, [(TRACK_N, "2001a2", 0, "-3")])
    result = compare_sides(a, b, samples=50)
    n = result["tracks"][TRACK_N]
    assert n["test"]["name"] == "exact McNemar" and "maj_test" not in n
    assert (n["test"]["right_in_a_only"], n["test"]["right_in_b_only"]) == (1, 1)
    assert "exact McNemar on the discordant pairs" in render_markdown(result)
