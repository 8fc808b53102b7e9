"""``predict.backend: anthropic`` and ``gemini`` end to end below the stage: the predictor and
the engine's ``Session`` over the real SDK (``anthropic``, ``google-genai``) against the
loopback fakes (tests/support/fake_anthropic.py, tests/support/fake_gemini.py). Every case runs
for both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.artifacts.items import Item
from rimo_eval.errors import StageError
from rimo_eval.predictors import create_predictor
from rimo_eval.predictors.base import Prediction
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.cache_tools import cache_text
from tests.support.factories import backend_section
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_gemini import FakeGemini
from tests.support.fake_provider import FakeProvider

KEY_ENV = "RIMO_NATIVE_TEST_KEY"
SECRET = "sk-native-test-5d1e9a7c3b2f4e60SECRET"


@dataclass
class Provider:
    backend: str
    fake: FakeProvider
    thinking: dict[str, Any]  # the params that turn thinking on, with thoughts returned
    think_directive: str  # the fake's directive for a thinking block / thought part
    reject_param: str  # a parameter the fake's 400 names ...
    reject_key: str  # ... and the params key the stage must name
    k_settings: dict[str, Any] = field(default_factory=dict)  # what makes k samples differ
    k_directive: str = ""


PROVIDERS = {
    "anthropic": lambda: Provider(
        "anthropic", FakeAnthropic(retry_after="0"),
        {"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking",
        "max_tokens", "predict.anthropic.max_tokens", {}, "by_arrival"),
    "gemini": lambda: Provider(
        "gemini", FakeGemini(retry_after="0"),
        {"thinking_config": {"thinking_budget": 1024, "include_thoughts": True}}, "thought",
        "generation_config.temperature", "predict.gemini.temperature", {"seed": 0},
        "by_seed"),
}


@pytest.fixture(scope="module", params=sorted(PROVIDERS))
def provider_server(request: pytest.FixtureRequest) -> Iterator[Provider]:
    p = PROVIDERS[request.param]()
    p.fake.start()
    yield p
    p.fake.stop()


@pytest.fixture
def provider(provider_server: Provider, monkeypatch: pytest.MonkeyPatch) -> Provider:
    monkeypatch.setenv(KEY_ENV, SECRET)
    fake = provider_server.fake
    fake.reset()
    fake.responder, fake.api_key, fake.hang_after = None, SECRET, None
    return provider_server


def config(p: Provider, tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    base = {"base_url": p.fake.base_url, "model": f"{p.backend}-fake", "api_key_env": KEY_ENV,
            "cache_dir": str(tmp_path / "cache"), "timeout_s": 10.0, "max_retries": 3,
            "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4}
    if p.backend == "anthropic":
        base["max_tokens"] = 4096
    return {**base, **overrides}


def n_item(pid: str, problem: str, gold: str = "0") -> Item:
    return Item(TRACK_N, pid, problem, "algebra", 1, True, f"hash-{pid}", answer=gold)


def p_item(pid: str, parts: list[str]) -> Item:
    return Item(TRACK_P, pid, f"Problem {pid}: prove all parts.", "geometry", len(parts), True,
                f"hash-{pid}", sub_problems=tuple(parts),
                sub_solutions=tuple("ref" for _ in parts))


def run(p: Provider, cfg: dict[str, Any], items: list[Item], samples: int = 1
        ) -> dict[tuple[str, int], Prediction]:
    predictor = create_predictor(p.backend, backend_section(p.backend, cfg))
    predictor.samples = samples
    return {(x.problem_id, x.sample): x for x in predictor.predict(items)}


def test_normal_reply_usage_and_cache(provider: Provider, tmp_path: Path) -> None:
    items = [n_item(f"n{i}", f"Compute {i}. [[gold:{i * 7}]]", str(i * 7)) for i in range(5)]
    cfg = config(provider, tmp_path)
    first = run(provider, cfg, items)
    assert {k[0]: v.prediction for k, v in first.items()} == {
        f"n{i}": str(i * 7) for i in range(5)}
    d = first[("n1", 0)].details
    assert d["finish_reason"] == "stop" and d["extraction"] == "boxed"
    assert d["usage"]["prompt_tokens"] > 0 and d["usage"]["completion_tokens"] > 0
    assert d["model"] and d["reasoning"] is None
    sent = len(provider.fake.records)
    assert sent == 5
    again = run(provider, cfg, items)  # a warm cache sends nothing, byte-identical details
    assert len(provider.fake.records) == sent
    assert {k: v.details for k, v in again.items()} == {k: v.details for k, v in first.items()}


def test_thinking_goes_to_reasoning_and_decoy_stays_text(provider: Provider,
                                                         tmp_path: Path) -> None:
    items = [n_item("t1", f"Find n. [[{provider.think_directive}:9]] [[gold:5]]", "5"),
             n_item("t2", f"Find m. [[{provider.think_directive}:9]] [[decoy:8]] [[gold:6]]",
                    "6")]
    preds = run(provider, config(provider, tmp_path, **provider.thinking), items)
    t1, t2 = preds[("t1", 0)], preds[("t2", 0)]
    assert t1.prediction == "5" and "\\boxed{9}" in t1.details["reasoning"]
    assert "\\boxed{9}" not in t1.details["text"]
    assert t1.details["usage"]["reasoning_tokens"] > 0
    assert t1.details["usage"]["completion_tokens"] > t1.details["usage"]["reasoning_tokens"]
    # A <think> written into the answer text is answer text: the last box is the answer.
    assert t2.prediction == "6" and "<think>" in t2.details["text"]
    assert "\\boxed{8}" not in (t2.details["reasoning"] or "")


def test_truncation_is_truncated(provider: Provider, tmp_path: Path) -> None:
    preds = run(provider, config(provider, tmp_path), [n_item("x", "Go. [[truncate]]")])
    d = preds[("x", 0)].details
    assert preds[("x", 0)].status == "ok" and preds[("x", 0)].prediction == ""
    assert d["finish_reason"] == "length" and d["extraction"] == "truncated"


@pytest.mark.parametrize("code", [429, 529, 500])
def test_transient_statuses_are_retried(provider: Provider, tmp_path: Path, code: int
                                        ) -> None:
    preds = run(provider, config(provider, tmp_path),
                [n_item("r", f"Go. [[fail:{code}:2]] [[gold:4]]", "4")])
    assert preds[("r", 0)].prediction == "4"
    assert [r.outcome for r in provider.fake.records][-1] == "ok"
    assert len(provider.fake.records) == 3


def test_persistent_500_is_that_items_error(provider: Provider, tmp_path: Path) -> None:
    preds = run(provider, config(provider, tmp_path, max_retries=1),
                [n_item("bad", "Go. [[fail:500:*]]"), n_item("ok", "Go. [[gold:1]]", "1")])
    assert preds[("ok", 0)].prediction == "1"
    bad = preds[("bad", 0)]
    assert bad.status == "error" and "failed after 2 attempt(s)" in bad.error
    assert "HTTP 500" in bad.error


def test_400_naming_a_parameter_stops_the_stage(provider: Provider, tmp_path: Path) -> None:
    with pytest.raises(StageError) as info:
        run(provider, config(provider, tmp_path),
            [n_item("p", f"Go. [[reject:{provider.reject_param}]]")])
    assert provider.reject_key in str(info.value)
    assert len(provider.fake.records) == 1  # not retried


def test_malformed_body_is_retried(provider: Provider, tmp_path: Path) -> None:
    preds = run(provider, config(provider, tmp_path),
                [n_item("m", "Go. [[malformed:2]] [[gold:3]]", "3")])
    assert preds[("m", 0)].prediction == "3" and len(provider.fake.records) == 3


def test_empty_reply_is_retried_then_an_error_kind(provider: Provider, tmp_path: Path) -> None:
    preds = run(provider, config(provider, tmp_path, max_retries=1),
                [n_item("e1", "Go. [[empty:1]] [[gold:2]]", "2"),
                 n_item("e2", "Go. [[empty:9]] [[gold:2]]", "2")])
    assert preds[("e1", 0)].prediction == "2"
    assert preds[("e2", 0)].status == "error"
    assert preds[("e2", 0)].details["error_kind"] == "empty"


def test_blocked_or_refused_is_its_own_error_kind(provider: Provider, tmp_path: Path) -> None:
    directive = "[[refusal]]" if provider.backend == "anthropic" else "[[blocked:candidate]]"
    preds = run(provider, config(provider, tmp_path), [n_item("b", f"Go. {directive}")])
    assert preds[("b", 0)].status == "error"
    assert preds[("b", 0)].details["error_kind"] == "blocked"
    assert len(provider.fake.records) == 1  # a block is not retried


def test_k_samples_differ(provider: Provider, tmp_path: Path) -> None:
    items = [n_item("k", f"Go. [[{provider.k_directive}:1,2,3]]", "2")]
    preds = run(provider, config(provider, tmp_path, **provider.k_settings), items, samples=3)
    assert sorted(preds[("k", j)].prediction for j in range(3)) == ["1", "2", "3"]
    assert len(provider.fake.records) == 3
    again = run(provider, config(provider, tmp_path, **provider.k_settings), items, samples=3)
    assert len(provider.fake.records) == 3  # all three cached, by sample index
    assert {k: v.prediction for k, v in again.items()} == {
        k: v.prediction for k, v in preds.items()}


def test_rimo_p_chaining(provider: Provider, tmp_path: Path) -> None:
    preds = run(provider, config(provider, tmp_path), [p_item("p1", ["A", "B", "C"])])
    pred = preds[("p1", 0)]
    assert pred.status == "ok" and len(pred.prediction) == 3
    bodies = [json.dumps(r.body) for r in provider.fake.ok_records()]
    assert len(bodies) == 3
    for k in range(1, 3):  # request k holds the model's own replies to parts 1..k-1
        for earlier in pred.prediction[:k]:
            assert json.dumps(earlier)[1:-1] in bodies[k]


def test_echoed_key_reaches_no_file(provider: Provider, tmp_path: Path) -> None:
    items = [n_item("e1", "Go. [[echo_key:reply]] [[gold:1]]", "1"),
             n_item("e2", "Go. [[echo_key]]")]
    preds = run(provider, config(provider, tmp_path), items)
    assert preds[("e1", 0)].prediction == "1"
    assert preds[("e2", 0)].status == "error"
    for pred in preds.values():
        assert SECRET not in json.dumps([pred.error, pred.details, pred.prediction])
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert files and not any(SECRET in f.read_text(errors="replace") for f in files)
    assert SECRET not in cache_text(tmp_path / "cache")  # the compressed entries, decoded


def test_wrong_key_stops_the_stage(provider: Provider, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key-0000000000")
    with pytest.raises(StageError) as info:
        run(provider, config(provider, tmp_path), [n_item("w", "Go.")] * 1)
    assert "authentication failed" in str(info.value) or "API key" in str(info.value)
    assert "sk-wrong-key" not in str(info.value)


def test_retry_after_reaches_the_engines_backoff(provider: Provider, tmp_path: Path) -> None:
    import asyncio

    from rimo_eval.chat.errors import EngineError, classify

    provider.fake.retry_after = "2"
    predictor = create_predictor(provider.backend,
                                 backend_section(provider.backend, config(provider, tmp_path)))
    transport = predictor.make_transport()

    async def once() -> EngineError:
        request = transport.request([{"role": "user", "content": "Go. [[fail:429:1]]"}])
        try:
            await transport._attempt(request)  # type: ignore[attr-defined]
        except EngineError as exc:
            return exc
        finally:
            await transport.aclose()
        raise AssertionError("the 429 was not raised")

    try:
        exc = asyncio.run(once())
    finally:
        provider.fake.retry_after = "0"
    decision = classify(exc)
    assert decision.retryable and decision.retry_after_s == pytest.approx(2.0, abs=0.01)


def test_unreachable_endpoint_stops_at_the_probe(provider: Provider, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StageError) as info:
        run(provider, config(provider, tmp_path, base_url=f"http://127.0.0.1:{port}"),
            [n_item("u", "Go.")])
    assert "connection refused" in str(info.value) and str(port) in str(info.value)


def test_breaker_stops_a_run_whose_calls_all_fail(provider: Provider, tmp_path: Path) -> None:
    items = [n_item(f"b{i}", f"Go {i}. [[fail:503:*]]") for i in range(8)]
    with pytest.raises(StageError) as info:
        run(provider, config(provider, tmp_path, max_retries=0, breaker_window=3,
                             concurrency=1), items)
    assert "breaker_window" in str(info.value)
    assert len(provider.fake.records) < 8


def test_a_spend_cap_429_is_not_retried_and_stops(provider: Provider, tmp_path: Path) -> None:
    if provider.backend != "anthropic":
        pytest.skip("Anthropic's error_code for a monthly spend cap")
    with pytest.raises(StageError) as info:
        run(provider, config(provider, tmp_path), [n_item("s", "Go. [[spend_limit]]")])
    assert "spend limit" in str(info.value) and len(provider.fake.records) == 1


def test_prompt_cache_tokens_are_recorded(provider: Provider, tmp_path: Path) -> None:
    cached = "[[cached:40:7]]" if provider.backend == "anthropic" else "[[cached:40]]"
    preds = run(provider, config(provider, tmp_path),
                [n_item("c", f"Go. {cached} [[gold:1]]", "1"), n_item("d", "Go. [[gold:2]]")])
    usage = preds[("c", 0)].details["usage"]
    assert usage["cache_read_tokens"] == 40
    if provider.backend == "anthropic":  # prompt_tokens: input + cache write + cache read
        assert usage["cache_write_tokens"] == 7 and usage["prompt_tokens"] >= 47
    # Nothing reported, nothing recorded: the details keep the openai backend's shape.
    assert set(preds[("d", 0)].details["usage"]) == {"prompt_tokens", "completion_tokens",
                                                     "reasoning_tokens"}
