"""The real ``anthropic`` SDK (async client) against ``fake_anthropic``, every reply and every
failure read through ``rimo_eval/chat/anthropic/translate.py``: what the native backend's
transport will do, minus the engine."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import anthropic
import httpx2
import pytest

from rimo_eval.chat.anthropic.translate import (
    classify_error,
    create_kwargs,
    parse_message,
)
from rimo_eval.chat.errors import ErrorDecision, retry_after_s
from rimo_eval.errors import ConfigError
from rimo_eval.params.chat import AnthropicParams
from tests.support import factories
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_provider import Reply
from tests.support.provider_fixtures import fake_provider_fixtures

KEY = "sk-ant-test-0123456789abcdef"
BASE = {"model": "claude-fake", "max_tokens": 4096}
THINKING = {**BASE, "thinking": {"type": "enabled", "budget_tokens": 1024}}


def section(settings: Mapping[str, Any]) -> AnthropicParams:
    """predict.anthropic, typed, as the transport gets it."""
    return factories.section(AnthropicParams, "predict.anthropic", settings)


provider_server, fake_fixture = fake_provider_fixtures(FakeAnthropic)


def client(fake: FakeAnthropic, **kw: Any) -> anthropic.AsyncAnthropic:
    # What the transport will hold: no SDK retries (the engine owns them), an explicit timeout.
    kw.setdefault("timeout", httpx2.Timeout(30.0, connect=5.0))
    return anthropic.AsyncAnthropic(base_url=fake.base_url, api_key=kw.pop("key", KEY),
                                    max_retries=0, **kw)


def call(fake: FakeAnthropic, prompt: str, settings: Mapping[str, Any] = BASE,
         messages: list[dict[str, str]] | None = None, **client_kw: Any
         ) -> tuple[dict[str, Any] | None, ErrorDecision | None]:
    """One request as the transport will send it: (parsed reply, None) or (None, decision)."""
    kwargs = create_kwargs(section(settings),
                           messages or [{"role": "user", "content": prompt}])

    async def go() -> tuple[dict[str, Any] | None, ErrorDecision | None]:
        async with client(fake, **client_kw) as c:
            try:
                return parse_message(await c.messages.create(**kwargs)), None
            except Exception as exc:
                return None, classify_error(exc, kwargs)

    return asyncio.run(go())


def test_normal_reply_request_and_usage(fake: FakeAnthropic) -> None:
    settings = {**BASE, "system_prompt": "Answer in a box."}
    messages = [{"role": "system", "content": "Be rigorous."},
                {"role": "user", "content": "Find n. [[gold:7]]"}]
    reply, error = call(fake, "", settings, messages)
    assert error is None and reply is not None
    assert reply["text"] == "Working through it carefully, the answer is \\boxed{7}."
    assert reply["reasoning"] is None and reply["finish_reason"] == "stop"
    assert reply["error_kind"] is None and reply["model"] == "claude-fake"
    # word counts: "Find n. [[gold:7]]" + "Answer in a box." + "Be rigorous."
    assert reply["usage"] == {"prompt_tokens": 3 + 4 + 2, "completion_tokens": 8,
                              "reasoning_tokens": 0, "cache_read_tokens": 0,
                              "cache_write_tokens": 0}
    [rec] = fake.records
    assert rec.path == "/v1/messages" and rec.api_key == KEY
    assert rec.headers["authorization"] == f"Bearer {KEY}"
    assert rec.headers["anthropic-version"] == "2026-10-21"
    assert rec.body == {"model": "claude-fake", "max_tokens": 4096,
                        "system": "Answer in a box.\n\nBe rigorous.",
                        "messages": [{"role": "user", "content": "Find n. [[gold:7]]"}]}


def test_thinking_blocks_are_reasoning_and_a_think_decoy_stays_answer_text(
        fake: FakeAnthropic) -> None:
    reply, _ = call(fake, "Find n. [[thinking:3:redacted]] [[decoy:5]] [[gold:7]]", THINKING)
    assert reply is not None
    assert reply["reasoning"] == "Perhaps \\boxed{3}. No: recount the cases."
    # A <think> block written into a text block is the model's answer text, kept whole.
    assert reply["text"].startswith("<think>\nMaybe \\boxed{5}? Check again.\n</think>")
    assert reply["text"].endswith("the answer is \\boxed{7}.") and "boxed{3}" not in reply["text"]
    # output_tokens holds the thinking; thinking_tokens says how much of it.
    assert reply["usage"]["reasoning_tokens"] == 6
    assert reply["usage"]["completion_tokens"] == len(reply["text"].split()) + 6
    assert fake.records[0].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_no_thinking_requested_gives_no_reasoning(fake: FakeAnthropic) -> None:
    reply, _ = call(fake, "[[thinking:3]] [[gold:7]]", BASE)
    assert reply is not None and reply["reasoning"] is None
    assert "thinking" not in fake.records[0].body


def test_adaptive_thinking_and_effort_are_passed_through(fake: FakeAnthropic) -> None:
    settings = {**BASE, "thinking": {"type": "adaptive"}, "effort": "high"}
    reply, _ = call(fake, "[[thinking:3]] [[gold:7]]", settings)
    assert reply is not None and "boxed{3}" in reply["reasoning"]
    body = fake.records[0].body
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "high"}


def test_max_tokens_stop_is_length(fake: FakeAnthropic) -> None:
    reply, _ = call(fake, "[[truncate]]")
    assert reply is not None and reply["finish_reason"] == "length"
    assert "boxed" not in reply["text"]


def test_budget_spent_thinking_is_length_with_no_text(fake: FakeAnthropic) -> None:
    reply, _ = call(fake, "[[thinking:3]] [[truncate:thinking]]", THINKING)
    assert reply is not None and (reply["text"], reply["finish_reason"]) == ("", "length")
    assert "boxed{3}" in reply["reasoning"] and reply["error_kind"] is None


@pytest.mark.parametrize(("code", "wait"), [(429, 2.0), (529, None), (500, None)])
def test_rate_limit_overload_and_server_errors_are_retried(fake: FakeAnthropic, code: int,
                                                           wait: float | None) -> None:
    prompt = f"[[fail:{code}:1]] [[gold:4]]"
    reply, error = call(fake, prompt)
    assert reply is None and error is not None
    assert (error.action, error.status, error.retry_after_s) == ("retry", code, wait)
    assert ("overloaded_error" in error.message) == (code == 529)
    again, error = call(fake, prompt)  # the retry the decision asks for
    assert error is None and again is not None and "boxed{4}" in again["text"]
    assert [r.outcome for r in fake.records] == [f"http-{code}", "ok"]
    assert list(fake.answered().values()) == [1]


def test_a_409_is_retried_as_the_sdk_retries_it(fake: FakeAnthropic) -> None:
    # The anthropic SDK's own _should_retry retries a 409 (a lock timeout): so does the engine.
    _, error = call(fake, "[[fail:409:1]] [[gold:4]]")
    assert error is not None and (error.action, error.status) == ("retry", 409)


def test_a_spend_limit_429_stops_the_stage_instead_of_retrying(fake: FakeAnthropic) -> None:
    _, error = call(fake, "[[spend_limit]]")
    assert error is not None and (error.action, error.status) == ("fatal", 429)
    assert error.message.startswith("monthly spend limit reached")


def test_retry_after_forms() -> None:
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_s({"retry-after": "3"}) == 3.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # past
    assert retry_after_s({"retry-after": "soon"}) is None and retry_after_s({}) is None


def test_sampling_parameters_on_api_2026_10_21_stop_the_stage_naming_the_key(
        fake: FakeAnthropic) -> None:
    reply, error = call(fake, "[[gold:1]]", {**BASE, "temperature": 0.6})
    assert reply is None and error is not None
    assert (error.action, error.param, error.params_key) == (
        "parameter", "temperature", "predict.anthropic.temperature")
    assert "change or null predict.anthropic.temperature" in error.message
    # On the older API version a model that takes them gets them, in the body.
    reply, error = call(fake, "[[gold:1]]", {**BASE, "temperature": 0.6, "top_p": 0.95,
                                            "api_version": "2023-06-01"})
    assert error is None and reply is not None
    assert fake.records[-1].headers["anthropic-version"] == "2023-06-01"
    assert (fake.records[-1].body["temperature"], fake.records[-1].body["top_p"]) == (0.6, 0.95)


def test_bad_thinking_budget_names_the_thinking_key(fake: FakeAnthropic) -> None:
    _, error = call(fake, "[[gold:1]]", {**BASE, "thinking": {"type": "enabled",
                                                              "budget_tokens": 512}})
    assert error is not None and error.action == "parameter"
    assert (error.param, error.params_key) == ("thinking.budget_tokens",
                                               "predict.anthropic.thinking")


def test_a_400_naming_nothing_sent_is_that_items_error(fake: FakeAnthropic) -> None:
    _, error = call(fake, "[[reject:tools]]")
    assert error is not None and (error.action, error.param, error.status) == ("item", None, 400)


def test_context_window_400_is_an_item_error_of_kind_context_length(
        fake: FakeAnthropic) -> None:
    fake.responder = lambda rec: fake.error(400, "prompt is too long: 210000 tokens > 200000 "
                                            "maximum")
    _, error = call(fake, "x", {**BASE, "system_prompt": "s"})
    assert error is not None and (error.action, error.kind) == ("item", "context_length")


def test_malformed_body_and_dropped_connection_are_retried(fake: FakeAnthropic) -> None:
    _, error = call(fake, "[[malformed:1]]")
    assert error is not None and error.action == "retry" and "malformed" in error.message
    _, error = call(fake, "[[drop:1]]")
    assert error is not None and error.action == "retry"
    assert error.message.startswith("APIConnectionError")


def test_hang_is_a_timeout_and_retried(fake: FakeAnthropic) -> None:
    fake.hang_after, fake.hang_s = 0, 2.0
    _, error = call(fake, "[[gold:1]]", timeout=httpx2.Timeout(0.3, connect=1.0))
    assert error is not None and error.action == "retry"
    assert error.message.startswith("APITimeoutError")


def test_rimo_p_chaining_sends_the_earlier_reply_forward(fake: FakeAnthropic) -> None:
    # RIMO-P part k's prompt holds the model's own replies to parts 1..k-1 (prompting.py).
    first, _ = call(fake, "Part 1: show that n is even.")
    assert first is not None and first["text"].startswith("Solution ")
    second, _ = call(fake, f"Proved: {first['text']}\nPart 2: show that n = 2.")
    assert second is not None and second["text"] != first["text"]
    assert first["text"] in fake.records[1].body["messages"][0]["content"]


def test_empty_content_and_refusal_are_item_error_kinds(fake: FakeAnthropic) -> None:
    reply, _ = call(fake, "[[empty:1]] [[gold:2]]")
    assert reply is not None and (reply["error_kind"], reply["retryable"]) == ("empty", True)
    reply, _ = call(fake, "[[refusal]]")
    assert reply is not None and (reply["error_kind"], reply["retryable"]) == ("blocked", False)
    assert reply["finish_reason"] == "content_filter"


def test_cache_tokens_are_counted_in_the_prompt_and_kept_apart(fake: FakeAnthropic) -> None:
    reply, _ = call(fake, "one two [[cached:100:20]]")
    assert reply is not None
    assert reply["usage"]["prompt_tokens"] == 3 + 100 + 20
    assert (reply["usage"]["cache_read_tokens"], reply["usage"]["cache_write_tokens"]) == (
        100, 20)


def test_three_samples_are_three_identical_requests_with_distinct_replies(
        fake: FakeAnthropic) -> None:
    # The API takes no seed: k samples are k identical requests (the engine's cache key
    # holds the sample index), each sampled afresh.
    replies = [call(fake, "[[by_arrival:11,12,13]]")[0] for _ in range(3)]
    assert [r["text"][-5:-1] for r in replies if r] == ["{11}", "{12}", "{13}"]
    assert len({json.dumps(r.body, sort_keys=True) for r in fake.records}) == 1
    assert len(fake.records) == 3


def test_wrong_key_stops_the_stage_and_x_api_key_is_accepted(fake: FakeAnthropic) -> None:
    fake.api_key = KEY
    _, error = call(fake, "[[gold:1]]", key="sk-ant-wrong")
    assert error is not None and (error.action, error.status) == ("fatal", 401)
    # The older header style, as curl and gateways send it.
    request = urllib.request.Request(
        f"{fake.base_url}/v1/messages", method="POST",
        data=json.dumps({"model": "m", "max_tokens": 8,
                         "messages": [{"role": "user", "content": "[[gold:9]]"}]}).encode(),
        headers={"x-api-key": KEY, "content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert "boxed{9}" in json.load(resp)["content"][0]["text"]
    request.headers = {"content-type": "application/json"}
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    assert err.value.code == 401


def test_key_echo_reaches_the_error_message_and_the_reply(fake: FakeAnthropic) -> None:
    # The raw material of the redaction test: the transport must scrub both.
    _, error = call(fake, "[[echo_key]]")
    assert error is not None and KEY in error.message
    reply, _ = call(fake, "[[echo_key:reply]] [[gold:1]]")
    assert reply is not None and KEY in reply["text"]


def test_wrong_base_url_is_fatal(fake: FakeAnthropic) -> None:
    fake.responder = lambda rec: Reply(404, {"type": "error", "error": {
        "type": "not_found_error", "message": "model: claude-nope"}})
    _, error = call(fake, "x")
    assert error is not None and (error.action, error.status) == ("fatal", 404)


def test_long_non_streamed_replies_need_an_explicit_timeout(fake: FakeAnthropic) -> None:
    settings = {**BASE, "max_tokens": 64000}

    async def default_timeout() -> None:
        async with anthropic.AsyncAnthropic(base_url=fake.base_url, api_key=KEY) as c:
            await c.messages.create(**create_kwargs(section(settings), [{"role": "user",
                                                                "content": "x"}]))

    with pytest.raises(ValueError, match="Streaming is required"):
        asyncio.run(default_timeout())
    reply, error = call(fake, "[[gold:3]]", settings)  # explicit timeout: sent
    assert error is None and reply is not None and fake.records[-1].body["max_tokens"] == 64000


def test_kwargs_are_plain_deterministic_and_checked() -> None:
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                {"role": "user", "content": "q2"}]
    first = create_kwargs(section(THINKING), messages)
    assert json.dumps(first, sort_keys=True) == json.dumps(
        create_kwargs(section(THINKING), messages), sort_keys=True)
    assert [m["role"] for m in first["messages"]] == ["user", "assistant", "user"]
    assert "extra_body" not in first and "extra_headers" not in first
    assert set(AnthropicParams.model_fields) >= {"model", "max_tokens", "temperature", "top_p",
                                                 "system_prompt", "thinking"}
    # The typed section refuses what the Messages API would (issue 31: translate takes it).
    with pytest.raises(ConfigError, match=r"predict\.anthropic\.seed: unknown key"):
        create_kwargs(section({**BASE, "seed": 1}), messages)
    with pytest.raises(ConfigError, match="max_tokens"):
        create_kwargs(section({**BASE, "max_tokens": None}), messages)
    with pytest.raises(ValueError, match="model is required"):
        create_kwargs(section({"max_tokens": 5}), messages)


_CLIENT = """
import sys, anthropic
c = anthropic.Anthropic(base_url=sys.argv[1], api_key="k", max_retries=0, timeout=60)
for i in range(4):
    c.messages.create(model="m", max_tokens=8,
                      messages=[{"role": "user", "content": f"part {i} [[gold:{i}]]"}])
"""


def test_request_log_tells_answered_from_cut_off_after_kill_9(fake: FakeAnthropic) -> None:
    # What the kill -9 / resume test will assert with: the log knows which requests were
    # answered in full and which one the killed client was waiting on.
    fake.hang_after, fake.hang_s = 2, 1.0
    child = subprocess.Popen([sys.executable, "-c", _CLIENT, fake.base_url])
    try:
        deadline = time.monotonic() + 60
        while not any(r.outcome == "hanging" for r in list(fake.records)):
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert len(fake.answered()) == 2 and set(fake.answered().values()) == {1}
    assert [r.prompt for r in fake.ok_records()] == ["part 0 [[gold:0]]", "part 1 [[gold:1]]"]
    assert [r.outcome for r in fake.records][2] in ("hanging", "hang")
