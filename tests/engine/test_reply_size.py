"""The fake server's reply-size option: reasoning-sized replies that the engine handles like
any other (the answer still extracted, the reasoning kept), and cached compressed."""

from __future__ import annotations

from pathlib import Path

from rimo_eval.artifacts.items import Item
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from rimo_eval.rimo.tracks import TRACK_N
from tests.support.cache_tools import cache_entries
from tests.support.chat_server import ChatServer
from tests.support.factories import backend_section


def test_reasoning_sized_replies_flow_through_the_engine_and_cache(tmp_path: Path) -> None:
    server = ChatServer(reasoning_bytes=32768, answer_bytes=2048).start()
    try:
        items = [Item(TRACK_N, f"n{i}", f"Compute {i}. [[gold:{i}]]", "algebra", 1, True,
                      f"h{i}", answer=str(i)) for i in range(3)]
        preds = OpenAIPredictor(backend_section(
            "openai", base_url=server.base_url, model="fake", api_key_env=None,
            cache_dir=str(tmp_path / "cache"), concurrency=3)).predict(items)
    finally:
        server.stop()
    assert [(p.status, p.prediction) for p in preds] == [("ok", "0"), ("ok", "1"), ("ok", "2")]
    for p in preds:
        assert len(p.details["raw_text"]) == 2048
        assert len(p.details["reasoning"]) == 32768
    assert preds[0].details["reasoning"] != preds[1].details["reasoning"]  # per prompt
    entries = cache_entries(tmp_path / "cache")
    assert len(entries) == 3
    assert all(e.stored < 0.45 * e.size for e in entries)  # text-like, compressed
