"""The full benchmark (all 791 items) through ``dvc exp run -S predict.backend=anthropic`` and
``... gemini`` against the loopback fakes, and through ``-S predict.backend=openai`` against
``tests/support/chat_server.py`` serving the same fake model: the metrics are equal.

The fake model is a fixed map from prompt to reply, built from the validated items with the
engine's own prompt templates: RIMO-N gets the gold in a box for two items in three and an
unboxed guess otherwise; RIMO-P gets the reference sub-solution for every part of half the
items (chained: each part's prompt holds the model's replies to the earlier parts) and an
attempt for the rest, so both tracks' metrics are strictly between 0 and 1.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.artifacts.paths import METRICS_PATH
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.chat_server import ChatServer
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_gemini import FakeGemini
from tests.support.fake_model import fake_model
from tests.support.fake_provider import FakeProvider, Record, Reply
from tests.support.pipeline_repo import sh
from tests.support.validated_repo import validated_copy

pytestmark = pytest.mark.slow


def scored(repo: Path) -> dict[str, Any]:
    metrics = json.loads((repo / METRICS_PATH).read_text())
    out = {k: v for k, v in metrics.items() if k != "provenance"}
    for track in (TRACK_N, TRACK_P):  # token counts are each fake's own way of counting
        usage = out[track].pop("usage")
        out[track]["requests"], out[track]["truncated"] = usage["requests"], usage["truncated"]
    return out


def exp_run(repo: Path, backend: str, base_url: str) -> dict[str, Any]:
    started = time.monotonic()
    # Up to score: the metrics compared are score's; judge, view and report add nothing here.
    sh(repo, "dvc", "exp", "run", "score", "-S", f"predict.backend={backend}",
       "-S", "predict.limit=null",
       "-S", f"predict.{backend}.base_url={base_url}", "-S", f"predict.{backend}.model=fake",
       "-S", f"predict.{backend}.api_key_env=RIMO_NATIVE_FULL_UNSET", timeout=900)
    print(f"dvc exp run, backend {backend}, 791 items: {time.monotonic() - started:.1f}s")
    return scored(repo)


def test_full_benchmark_native_equals_openai(tmp_path: Path, validated_base: Path) -> None:
    repo = validated_copy(validated_base, tmp_path / "repo")
    replies = fake_model(repo / "data" / "items")

    server = ChatServer(responder=lambda body, prompt: replies.get(prompt)).start()
    try:
        expected = exp_run(repo, "openai", server.base_url)
    finally:
        server.stop()
    assert 0 < expected[TRACK_N]["accuracy"] < 1 and expected[TRACK_N]["n"] == 335
    assert 0 < expected[TRACK_P]["strict"] < 1

    for cls in (FakeAnthropic, FakeGemini):
        fake: FakeProvider = cls()

        def respond(record: Record, fake: FakeProvider = fake) -> Reply | None:
            text = replies.get(record.prompt)
            return None if text is None else fake.answer(record, text)

        fake.responder = respond
        backend = "anthropic" if cls is FakeAnthropic else "gemini"
        with fake:
            got = exp_run(repo, backend, fake.base_url)
            assert {r.outcome for r in fake.records} == {"ok"}
            assert len(fake.records) == got[TRACK_N]["requests"] + got[TRACK_P]["requests"]
        assert got == expected, backend
