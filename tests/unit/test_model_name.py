"""The run's model, one string for `dvc exp show` (reports/model.json) and the leaderboard.

Issue 29 §5: the recommended `dvc exp show` view had only predict.openai.model, so replay runs
all read "replay" and an anthropic or gemini run showed no model. The score stage now writes the
backend and model of whatever backend ran, from what the predictions record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rimo_eval.artifacts.model_name import PACKAGED_LOCAL, model_name, run_label
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N
from rimo_eval.score.stage import score
from tests.support.factories import predict_section, section, small_benchmark

BOOT = section(ScoreParams, "score", bootstrap={"samples": 20, "seed": 0, "confidence": 0.95})


@pytest.mark.parametrize(("backend", "section", "label"), [
    ("openai", {"model": "Qwen/Qwen3-8B", "base_url": "http://x"}, "openai Qwen/Qwen3-8B"),
    ("anthropic", {"model": "claude-sonnet-4-5"}, "anthropic claude-sonnet-4-5"),
    ("gemini", {"model": "gemini-2.5-pro"}, "gemini gemini-2.5-pro"),
    ("replay", {"path": "runs/a.jsonl"}, "replay runs/a.jsonl"),
    ("local", {"model_path": None}, f"local {PACKAGED_LOCAL}"),
    ("local", {"model_path": "models/q.gguf"}, "local models/q.gguf"),
    ("constant", {"answer": "0", "solution": ""}, "constant '0'"),
    ("constant", {}, "constant"),
    ("oracle", {}, "oracle"),
    ("my-plugin", {"model": "m-1"}, "my-plugin m-1"),
    ("my-plugin", {}, "my-plugin"),
])
def test_every_backend_names_its_model(backend: str, section: dict, label: str) -> None:
    assert run_label(backend, section) == label
    assert model_name(backend, section) == label.removeprefix(f"{backend} ") or \
        backend in ("constant", "oracle")


def run(tmp_path: Path, cfg: dict) -> dict:
    predict(predict_section(cfg), tmp_path / "items", tmp_path / "preds")
    score(BOOT, tmp_path / "items", tmp_path / "preds", tmp_path / "scores",
          tmp_path / "reports/metrics.json", tmp_path / "plots")
    return json.loads((tmp_path / "reports/model.json").read_text(encoding="utf-8"))


def test_score_writes_the_model_the_predictions_were_made_with(tmp_path: Path) -> None:
    small_benchmark(tmp_path / "items")
    replay = tmp_path / "my_model.jsonl"
    replay.write_text(json.dumps({"track": TRACK_N, "problem_id": "2001a1",
                                  "prediction": "12"}) + "\n", encoding="utf-8")
    assert run(tmp_path, {"backend": "replay", "replay": {"path": str(replay)}}) == {
        "model": f"replay {replay}"}
    assert run(tmp_path, {"backend": "constant", "constant": {"answer": "0", "solution": ""}}
               ) == {"model": "constant '0'"}
    # No item evaluated: nothing to name (DVC shows "-").
    assert run(tmp_path, {"backend": "oracle", "limit": 0}) == {"model": None}
