"""The report's cost and budget section, from the metrics the real score stage writes."""

from __future__ import annotations

import json
from pathlib import Path

from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.report.cost import cost_table, samples_table
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.stage import score
from tests.support.factories import predict_section, section, small_benchmark


def test_cost_table_from_usage_with_price() -> None:
    metrics = {
        "sample": {"evaluated": {TRACK_N: 4, TRACK_P: 2}},
        TRACK_N: {"k": 2, "usage": {"requests": 8, "prompt_tokens": 4000,
                                    "completion_tokens": 1000, "reasoning_tokens": 600,
                                    "truncated": 2, "context_errors": 0, "cost_usd": 0.018}},
        TRACK_P: {"k": 2, "usage": {"requests": 9, "prompt_tokens": 100, "completion_tokens": 10,
                                    "reasoning_tokens": 0, "truncated": 0, "context_errors": 1,
                                    "cost_usd": 0.0003}},
    }
    rows = cost_table(metrics).set_index("track").to_dict("index")
    n, total = rows[TRACK_N], rows["total"]
    assert (n["requests"], n["reasoning tokens per item"], n["share truncated"]) == (8, "150.0",
                                                                                    "25.0%")
    assert n["cost (USD)"] == "0.0180"
    assert total["requests"] == 17 and total["context-length errors"] == 1
    assert total["share truncated"] == f"{2 / 12:.1%}" and total["cost (USD)"] == "0.0183"
    assert total["reasoning tokens per item"] == "100.0"


def test_cost_and_samples_tables_from_a_real_score_run(tmp_path: Path) -> None:
    small_benchmark(tmp_path / "items")
    predict(predict_section(backend="oracle", samples=2), tmp_path / "items", tmp_path / "preds")
    cfg = section(ScoreParams, "score", bootstrap={"samples": 50, "seed": 0, "confidence": 0.95})
    m = score(cfg, tmp_path / "items", tmp_path / "preds", tmp_path / "s", tmp_path / "m.json",
              tmp_path / "plots")
    m = json.loads(json.dumps(m))
    table = cost_table(m)
    assert table["cost (USD)"].tolist() == ["not priced"] * 3  # the oracle costs nothing known
    assert table["samples per item"].tolist() == [2, 2, 2] and table["requests"].sum() == 0
    got = samples_table(m).set_index("metric")["value"].to_dict()
    assert got["RIMO-N.mean_at_k.accuracy"] == 1.0 and got["RIMO-P.pass_at_k"] == 1.0
    assert got["RIMO-N.maj_at_k"] == 1.0 and "RIMO-N.pass_at.1" in got
    predict(predict_section({"backend": "oracle"}), tmp_path / "items", tmp_path / "preds")
    m = score(section(ScoreParams, "score"), tmp_path / "items", tmp_path / "preds",
              tmp_path / "s", tmp_path / "m.json", tmp_path / "plots")
    assert samples_table(m).empty and "k" not in m[TRACK_N]
