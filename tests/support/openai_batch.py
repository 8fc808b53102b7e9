"""The openai backend in Batch API mode against the fake Batch API (tests/support/fake_batch.py):
its config, items and a predict to compare runs by."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.items import Item
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import backend_section
from tests.support.fake_batch import FakeBatchServer

KEY_ENV = "RIMO_TEST_API_KEY"


def config(fake: FakeBatchServer, cache: Path, batch: bool = True, **batch_opts: Any
           ) -> dict[str, Any]:
    return {"base_url": fake.base_url, "model": "fake-model", "api_key_env": KEY_ENV,
            "cache_dir": str(cache), "timeout_s": 10.0, "max_retries": 1,
            "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4,
            "batch": {"enabled": batch, "poll_s": 0.01, **batch_opts}}


def n_item(i: int, extra: str = "") -> Item:
    return Item(TRACK_N, f"n{i}", f"Compute {i}. [[gold:{i * 3}]]{extra}", "algebra", 1, True,
                f"h{i}", answer=str(i * 3))


def p_item(i: int, parts: int) -> Item:
    return Item(TRACK_P, f"p{i}", f"Problem p{i}: prove all parts.", "geometry", parts, True,
                f"hp{i}", sub_problems=tuple(f"Part {j} of p{i}" for j in range(parts)),
                sub_solutions=tuple("ref" for _ in range(parts)))


ITEMS = [*(n_item(i) for i in range(6)), p_item(0, 3), p_item(1, 1), p_item(2, 2)]


def predict(cfg: dict[str, Any], items: list[Item], samples: int = 1) -> str:
    predictor = OpenAIPredictor(backend_section("openai", cfg))
    predictor.samples = samples
    return json.dumps([asdict(p) for p in predictor.predict(items)], sort_keys=True)
