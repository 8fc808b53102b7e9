"""The claude backend in batch mode against the fake Message Batches API
(tests/support/fake_anthropic_batch.py) in front of the fake Messages API: its fixture, config
and a predict to compare runs by."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.artifacts.items import Item
from rimo_eval.predictors.native_chat import AnthropicPredictor
from tests.support.factories import backend_section
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_anthropic_batch import FakeMessageBatches

KEY_ENV = "RIMO_TEST_ANTHROPIC_KEY"


SECRET = "sk-ant-batch-test-7c41e0d29a8b5f36SECRET"


@pytest.fixture(name="fake")
def fake_message_batches(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessageBatches]:
    """The fake Message Batches API in front of a fake model; the key in ``KEY_ENV``."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    model = FakeAnthropic(retry_after="0").start()
    srv = FakeMessageBatches(model=model).start()
    yield srv
    srv.stop()
    model.stop()


def config(fake: FakeMessageBatches, cache: Path, batch: bool = True, **batch_opts: Any
           ) -> dict[str, Any]:
    return {"base_url": fake.base_url, "model": "claude-fake", "api_key_env": KEY_ENV,
            "cache_dir": str(cache), "max_tokens": 4096, "timeout_s": 10.0, "max_retries": 1,
            "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4,
            "batch": {"enabled": batch, "poll_s": 0.01, **batch_opts}}


def predict(cfg: dict[str, Any], items: list[Item], samples: int = 1) -> str:
    predictor = AnthropicPredictor(backend_section("anthropic", cfg))
    predictor.samples = samples
    return json.dumps([asdict(p) for p in predictor.predict(items)], sort_keys=True)
