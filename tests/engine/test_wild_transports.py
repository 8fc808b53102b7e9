"""Every way a reply enters the engine makes its text valid and flags it (issue 28, section 1):
the native Anthropic and Gemini SDKs, the OpenAI Batch API, Anthropic's Message Batches and
``--import-batch`` against their loopback fakes, and the in-process llama.cpp transport. The
openai backend's own path, with score and the view, is tests/engine/test_wild_replies.py.

Each fake answers the marked items with a lone surrogate in the answer text (and in the
thinking where the API has some); the run must keep and grade them (the box is intact), flag
them ``unicode_repaired``, cache the repaired reply and send nothing on a rerun.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.artifacts.items import Item
from rimo_eval.chat.cache import ResponseCache
from rimo_eval.chat.llama.transport import LlamaTransport
from rimo_eval.chat.transport import ChatReply
from rimo_eval.params.chat import LocalParams
from rimo_eval.predictors import create_predictor
from rimo_eval.predictors.base import Prediction
from rimo_eval.predictors.batch_files import export_batch, import_batch
from rimo_eval.predictors.native_chat import AnthropicPredictor
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.chat_server import ChatServer, Shaped
from tests.support.factories import backend_section
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_anthropic_batch import FakeMessageBatches
from tests.support.fake_batch import FakeBatchServer
from tests.support.fake_gemini import FakeGemini
from tests.support.fake_provider import FakeProvider, Record, Reply

KEY_ENV = "RIMO_WILD_TEST_KEY"
KEY = "sk-wild-test-0b9d7e5c3a1f2468"
WILD = "[[wild]]"
BROKEN = "Broken \ud800 half, so \\boxed{7}."
THOUGHT = "Hmm \udfff, recount."


def items() -> list[Item]:
    """Four RIMO-N items (gold 7; two marked) and a marked 2-part RIMO-P item."""
    n = [Item(TRACK_N, f"n{i}", f"Compute n{i}. [[gold:7]]{f' {WILD}' if i < 2 else ''}",
              "algebra", 1, True, f"h{i}", answer="7") for i in range(4)]
    p = Item(TRACK_P, "p0", f"Prove p0. {WILD}", "geometry", 2, True, "hp0",
             sub_problems=("p0 part 1", "p0 part 2"), sub_solutions=("ref 1", "ref 2"))
    return [*n, p]


def check(preds: list[Prediction]) -> None:
    by_id = {p.problem_id: p for p in preds}
    assert {p.status for p in preds} == {"ok"}, [p.error for p in preds]
    assert {pid: p.prediction for pid, p in by_id.items() if p.track == TRACK_N} == dict.fromkeys(
        ("n0", "n1", "n2", "n3"), "7")
    flagged = {pid for pid, p in by_id.items() if p.details.get("unicode_repaired")}
    assert flagged == {"n0", "n1"}
    assert "Broken \ufffd half" in by_id["n0"].details["raw_text"]
    parts = by_id["p0"].details["parts"]
    assert [d.get("unicode_repaired") for d in parts] == [True, True]
    assert by_id["p0"].prediction[0].startswith("Broken \ufffd half")


def run_twice(make: Any, records: Any) -> None:
    """Predict twice with the predictor ``make()`` builds: the second run sends nothing and
    gives the same predictions."""
    first = make().predict(items())
    check(first)
    sent = len(records())
    again = make().predict(items())
    assert len(records()) == sent
    dump = [json.dumps(asdict(p), sort_keys=True) for p in first]
    assert [json.dumps(asdict(p), sort_keys=True) for p in again] == dump


def chat_shape(completion: dict[str, Any], prompt: str) -> Shaped:
    if WILD in prompt:
        completion["choices"][0]["message"]["content"] = BROKEN
    return None


# --- native SDKs --------------------------------------------------------------------------------
def native_responder(fake: FakeProvider) -> Any:
    def respond(record: Record) -> Reply | None:
        if WILD not in record.prompt:
            return None
        reply = fake.answer(record, BROKEN)
        body = reply.body
        assert isinstance(body, dict)
        if isinstance(fake, FakeAnthropic):
            body["content"].insert(0, {"type": "thinking", "thinking": THOUGHT,
                                       "signature": "sig"})
        else:
            body["candidates"][0]["content"]["parts"].insert(0, {"text": THOUGHT,
                                                                 "thought": True})
        return reply
    return respond


@pytest.mark.parametrize("backend", ["anthropic", "gemini"])
def test_native_sdks(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    fake: FakeProvider = (FakeAnthropic if backend == "anthropic" else FakeGemini)(
        retry_after="0")
    fake.responder = native_responder(fake)
    cfg: dict[str, Any] = {
        "base_url": None, "model": f"{backend}-fake", "api_key_env": KEY_ENV,
        "cache_dir": str(tmp_path / "cache"), "timeout_s": 10.0, "max_retries": 1,
        "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4}
    cfg |= ({"max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 1024}}
            if backend == "anthropic" else
            {"thinking_config": {"thinking_budget": 1024, "include_thoughts": True}})
    with fake:
        cfg["base_url"] = fake.base_url
        section = backend_section(backend, cfg)
        run_twice(lambda: create_predictor(backend, section), lambda: fake.records)
        reasoning = create_predictor(backend, section).predict(items()[:1])[0].details["reasoning"]
    assert reasoning == "Hmm \ufffd, recount."


# --- batch APIs ---------------------------------------------------------------------------------
def test_openai_batch_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    chat = ChatServer(hang_s=60.0, shape=chat_shape).start()
    fake = FakeBatchServer(chat).start()
    cfg = backend_section(
        "openai", base_url=fake.base_url, model="fake-model", api_key_env=KEY_ENV,
        cache_dir=str(tmp_path / "cache"), timeout_s=10.0, max_retries=1,
        backoff_initial_s=0.01, backoff_max_s=0.05, concurrency=4,
        batch={"enabled": True, "poll_s": 0.01})
    try:
        run_twice(lambda: OpenAIPredictor(cfg), lambda: chat.records)
        assert [e for e in fake.log if e["event"] == "create"]  # it went through batches
    finally:
        fake.stop()
        chat.stop()


def test_anthropic_message_batches_results(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    model = FakeAnthropic(retry_after="0")
    model.responder = native_responder(model)
    model.start()
    fake = FakeMessageBatches(model=model).start()
    cfg = backend_section(
        "anthropic", base_url=fake.base_url, model="claude-fake", api_key_env=KEY_ENV,
        cache_dir=str(tmp_path / "cache"), max_tokens=4096, timeout_s=10.0,
        max_retries=1, backoff_initial_s=0.01, backoff_max_s=0.05,
        concurrency=4, batch={"enabled": True, "poll_s": 0.01},
        thinking={"type": "enabled", "budget_tokens": 1024})
    try:
        run_twice(lambda: AnthropicPredictor(cfg), lambda: model.records)
        assert [e for e in fake.log if e["event"] == "create"]
    finally:
        fake.stop()
        model.stop()


def test_import_batch_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--import-batch`` reads an engine's output file (vLLM run-batch) straight into the
    cache: a line with an escaped lone surrogate is imported repaired and flagged."""
    monkeypatch.setenv(KEY_ENV, KEY)
    # Listing the name and nothing more: imported replies then serve the online run (batch
    # files carry no report of the weights: rimo_eval.chat.served).
    chat = ChatServer(hang_s=60.0, shape=chat_shape,
                      model_card={"id": "fake-model", "object": "model"}).start()
    cfg = backend_section(
        "openai", base_url=chat.base_url, model="fake-model", api_key_env=KEY_ENV,
        cache_dir=str(tmp_path / "cache"), timeout_s=10.0, max_retries=1,
        backoff_initial_s=0.01, backoff_max_s=0.05, concurrency=4)
    try:
        for _round in range(2):  # RIMO-N and first parts, then second parts
            export_batch(OpenAIPredictor(cfg), items(), tmp_path / "in.jsonl")
            lines = [json.loads(x) for x in (tmp_path / "in.jsonl").read_text().splitlines()]
            out = []
            for line in lines:  # what run-batch writes: the server's answer to each body
                body = line["body"]
                prompt = body["messages"][-1]["content"]
                content = BROKEN if WILD in prompt else "Plainly \\boxed{7}."
                out.append({"custom_id": line["custom_id"], "response": {
                    "status_code": 200, "body": {"choices": [
                        {"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}]}}})
            # ensure_ascii: the surrogate is the escape \ud800 in the file, as JSON allows
            (tmp_path / "out.jsonl").write_text("".join(json.dumps(o) + "\n" for o in out))
            assert "\\ud800" in (tmp_path / "out.jsonl").read_text()
            import_batch(OpenAIPredictor(cfg), items(), tmp_path / "out.jsonl")
        preds = OpenAIPredictor(cfg).predict(items())  # every reply cached: nothing sent
    finally:
        chat.stop()
    assert not chat.records
    by_id = {p.problem_id: p for p in preds}
    assert by_id["n0"].details.get("unicode_repaired") is True
    assert by_id["n2"].details.get("unicode_repaired") is None
    assert [d.get("unicode_repaired") for d in by_id["p0"].details["parts"]] == [True, True]
    assert {p.prediction for p in preds if p.track == TRACK_N} == {"7"}


# --- llama.cpp in process -----------------------------------------------------------------------
class _Completion:
    """What ``llama_cpp.Llama.create_completion`` returns; the real model cannot be made to
    write a lone surrogate (llama-cpp-python drops bytes it cannot decode), so the transport is
    handed one to show that its reply enters through the same door."""

    def create_completion(self, **request: Any) -> dict[str, Any]:
        return {"choices": [{"text": BROKEN, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 5}}

    def reset(self) -> None:  # the transport starts each request from its prompt alone
        pass

    def close(self) -> None:
        pass


def test_llama_in_process_reply(tmp_path: Path) -> None:
    transport = LlamaTransport(tmp_path / "model.gguf", "0" * 64, LocalParams())
    transport._llm = _Completion()
    reply = transport._generate(transport.request([{"role": "user", "content": "hi"}]))
    assert reply.texts == ["Broken \ufffd half, so \\boxed{7}."]
    assert reply.flags == ["unicode_repaired"]
    cache = ResponseCache(tmp_path / "cache")
    cache.put("k" * 64, {"request": 1}, reply.to_json())  # used to raise UnicodeEncodeError
    stored = ChatReply.from_json(cache.get("k" * 64, {"request": 1}) or {})
    assert stored == reply
