"""The real ``google-genai`` SDK (async client) against ``fake_gemini``, every reply and every
failure read through ``rimo_eval/chat/gemini/translate.py``: what the native backend's transport
will do, minus the engine."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

import pytest
from google import genai
from google.genai import types

from rimo_eval.chat.errors import ErrorDecision
from rimo_eval.chat.gemini.translate import (
    classify_error,
    generate_kwargs,
    parse_response,
)
from rimo_eval.errors import ConfigError
from rimo_eval.params.chat import GeminiParams
from tests.support import factories
from tests.support.fake_gemini import FakeGemini
from tests.support.fake_provider import Reply
from tests.support.provider_fixtures import fake_provider_fixtures

KEY = "AIzaFakeKey0123456789abcdef"
BASE = {"model": "gemini-fake", "max_output_tokens": 2048}
THOUGHTS = {**BASE, "thinking_config": {"thinking_budget": 1024, "include_thoughts": True}}
PATH = "/v1beta/models/gemini-fake:generateContent"
# google-genai 3.6.1 subclasses aiohttp.ClientSession, which aiohttp 3.14 frowns upon.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning")


def section(settings: Mapping[str, Any]) -> GeminiParams:
    """predict.gemini, typed, as the transport gets it."""
    return factories.section(GeminiParams, "predict.gemini", settings)


provider_server, fake_fixture = fake_provider_fixtures(FakeGemini)


def client(fake: FakeGemini, key: str = KEY, **options: Any) -> genai.Client:
    # What the transport will hold: v1beta, no SDK retries (the engine owns them).
    options.setdefault("api_version", "v1beta")
    options.setdefault("retry_options", types.HttpRetryOptions(attempts=1))
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=fake.base_url,
                                                                     **options))


def call(fake: FakeGemini, prompt: str, settings: Mapping[str, Any] = BASE,
         messages: list[dict[str, str]] | None = None, sample: int = 0, key: str = KEY,
         **options: Any) -> tuple[dict[str, Any] | None, ErrorDecision | None]:
    """One request as the transport will send it: (parsed reply, None) or (None, decision)."""
    kwargs = generate_kwargs(section(settings),
                             messages or [{"role": "user", "content": prompt}], sample)

    async def go() -> tuple[dict[str, Any] | None, ErrorDecision | None]:
        c = client(fake, key, **options)
        try:
            return parse_response(await c.aio.models.generate_content(**kwargs)), None
        except Exception as exc:
            return None, classify_error(exc, kwargs)
        finally:
            await c.aio.aclose()

    return asyncio.run(go())


def test_normal_reply_request_and_usage(fake: FakeGemini) -> None:
    settings = {**BASE, "temperature": 0.7, "top_p": 0.95, "system_prompt": "Answer in a box."}
    messages = [{"role": "system", "content": "Be rigorous."},
                {"role": "user", "content": "Part 1. [[gold:2]]"},
                {"role": "assistant", "content": "Proved."},
                {"role": "user", "content": "Find n. [[gold:7]]"}]
    reply, error = call(fake, "", settings, messages)
    assert error is None and reply is not None
    assert reply["text"] == "Working through it carefully, the answer is \\boxed{7}."
    assert (reply["reasoning"], reply["finish_reason"], reply["error_kind"]) == (
        None, "stop", None)
    assert reply["model"] == "gemini-fake"
    # word counts: three turns (3 + 1 + 3) and the system instruction (4 + 2)
    assert reply["usage"] == {"prompt_tokens": 7 + 6, "completion_tokens": 8,
                              "reasoning_tokens": 0, "cache_read_tokens": 0,
                              "cache_write_tokens": 0}
    [rec] = fake.records
    assert rec.path == PATH and rec.headers["x-goog-api-key"] == KEY
    assert [c["role"] for c in rec.body["contents"]] == ["user", "model", "user"]
    assert rec.body["systemInstruction"]["parts"] == [{"text": "Answer in a box.\n\nBe rigorous."}]
    assert rec.body["generationConfig"] == {"temperature": 0.7, "topP": 0.95,
                                            "maxOutputTokens": 2048}


def test_thought_parts_are_reasoning_and_a_think_decoy_stays_answer_text(
        fake: FakeGemini) -> None:
    reply, _ = call(fake, "Find n. [[thought:3]] [[decoy:5]] [[gold:7]]", THOUGHTS)
    assert reply is not None
    assert reply["reasoning"] == "Perhaps \\boxed{3}. No: recount the cases."
    assert reply["text"].startswith("<think>\nMaybe \\boxed{5}? Check again.\n</think>")
    assert reply["text"].endswith("the answer is \\boxed{7}.") and "boxed{3}" not in reply["text"]
    # candidatesTokenCount excludes the thoughts; completion tokens hold both.
    assert reply["usage"]["reasoning_tokens"] == 6
    assert reply["usage"]["completion_tokens"] == len(reply["text"].split()) + 6
    config = fake.records[0].body["generationConfig"]
    assert config["thinkingConfig"] == {"thinking_budget": 1024, "include_thoughts": True}


def test_thoughts_not_included_are_still_counted(fake: FakeGemini) -> None:
    settings = {**BASE, "thinking_config": {"thinking_level": "high"}}
    reply, _ = call(fake, "[[thought:3]] [[gold:7]]", settings)
    assert reply is not None and reply["reasoning"] is None
    assert reply["usage"]["reasoning_tokens"] == 6 and "boxed{3}" not in reply["text"]


def test_max_tokens_finish_is_length(fake: FakeGemini) -> None:
    reply, _ = call(fake, "[[truncate]]")
    assert reply is not None and reply["finish_reason"] == "length"


def test_thinking_that_used_up_the_budget_is_length_not_empty(fake: FakeGemini) -> None:
    # No parts at all, finishReason MAX_TOKENS: truncated, not retried as an empty reply.
    reply, _ = call(fake, "[[thought:3]] [[truncate:thinking]]", THOUGHTS)
    assert reply is not None and (reply["text"], reply["finish_reason"]) == ("", "length")
    assert reply["error_kind"] is None and reply["usage"]["reasoning_tokens"] == 6


def test_continuation_is_not_followed(fake: FakeGemini) -> None:
    # The SDK's automatic continuation would send a second, billed request the cache never
    # sees; generate_kwargs turns it off, and the cut-off reply reads as "length".
    reply, _ = call(fake, "[[continuation]] [[gold:4]]")
    assert reply is not None and reply["finish_reason"] == "length"
    assert len(fake.records) == 1 and "continuationToken" not in fake.records[0].body


@pytest.mark.parametrize(("code", "wait"), [(429, 2.0), (500, None), (503, None)])
def test_rate_limit_and_server_errors_are_retried(fake: FakeGemini, code: int,
                                                  wait: float | None) -> None:
    prompt = f"[[fail:{code}:1]] [[gold:4]]"
    _, error = call(fake, prompt)
    assert error is not None
    assert (error.action, error.status, error.retry_after_s) == ("retry", code, wait)
    again, error = call(fake, prompt)
    assert error is None and again is not None and "boxed{4}" in again["text"]
    assert [r.outcome for r in fake.records] == [f"http-{code}", "ok"]


def test_a_409_is_that_items_error_not_retried(fake: FakeGemini) -> None:
    """Google's 409 is ABORTED or ALREADY_EXISTS, which a retry of the same call is not meant
    to cure (gemini/translate.py, ``CONFLICT``), unlike the 409 the OpenAI and Anthropic
    backends retry."""
    fake.responder = lambda rec: Reply(409, {"error": {
        "code": 409, "message": "The operation was aborted.", "status": "ABORTED"}}, {})
    _, error = call(fake, "x")
    assert error is not None and (error.action, error.status) == ("item", 409)
    assert len(fake.records) == 1


def test_retry_info_delay_is_used_without_a_retry_after_header(fake: FakeGemini) -> None:
    def no_header(rec: Any) -> Reply:
        reply = fake.error(429, "Resource has been exhausted (e.g. check quota).")
        reply.headers.clear()
        return reply

    fake.responder = no_header
    _, error = call(fake, "x")
    assert error is not None and (error.action, error.retry_after_s) == ("retry", 2.0)


def test_400_naming_a_field_stops_the_stage_naming_the_key(fake: FakeGemini) -> None:
    _, error = call(fake, "[[reject:temperature]]", {**BASE, "temperature": 3.0})
    assert error is not None and error.action == "parameter"
    assert (error.param, error.params_key) == ("generation_config.temperature",
                                               "predict.gemini.temperature")
    assert "change or null predict.gemini.temperature" in error.message


def test_thinking_budget_and_level_together_name_thinking_config(fake: FakeGemini) -> None:
    settings = {**BASE, "thinking_config": {"thinking_budget": 1024, "thinking_level": "high"}}
    _, error = call(fake, "[[gold:1]]", settings)
    assert error is not None and error.action == "parameter"
    assert error.params_key == "predict.gemini.thinking_config"


def test_context_window_400_is_an_item_error_of_kind_context_length(fake: FakeGemini) -> None:
    fake.responder = lambda rec: fake.error(
        400, "The input token count (1200000) exceeds the maximum number of tokens allowed "
        "(1048576).")
    _, error = call(fake, "x")
    assert error is not None and (error.action, error.kind) == ("item", "context_length")


def test_malformed_body_and_dropped_connection_are_retried_at_once(fake: FakeGemini) -> None:
    _, error = call(fake, "[[malformed:1]]")
    assert error is not None and error.action == "retry" and "malformed" in error.message
    started = time.monotonic()
    _, error = call(fake, "[[drop:1]]")
    # With retry_options attempts=1 the SDK does not sleep and retry on its own.
    assert error is not None and error.action == "retry" and time.monotonic() - started < 5
    assert len(fake.records) == 2


def test_hang_is_a_timeout_and_retried(fake: FakeGemini) -> None:
    fake.hang_after, fake.hang_s = 0, 2.0
    _, error = call(fake, "[[gold:1]]", timeout=300)  # milliseconds
    assert error is not None and error.action == "retry"


def test_rimo_p_chaining_sends_the_earlier_reply_forward(fake: FakeGemini) -> None:
    # RIMO-P part k's prompt holds the model's own replies to parts 1..k-1 (prompting.py).
    first, _ = call(fake, "Part 1: show that n is even.")
    assert first is not None and first["text"].startswith("Solution ")
    second, _ = call(fake, f"Proved: {first['text']}\nPart 2: show that n = 2.")
    assert second is not None and second["text"] != first["text"]
    assert first["text"] in fake.records[1].body["contents"][0]["parts"][0]["text"]


def test_blocked_prompt_blocked_candidate_and_empty_candidates(fake: FakeGemini) -> None:
    reply, _ = call(fake, "[[blocked:prompt]]")
    assert reply is not None and (reply["error_kind"], reply["retryable"]) == ("blocked", False)
    assert "SAFETY" in reply["error"]
    reply, _ = call(fake, "[[blocked:candidate]]")
    assert reply is not None and (reply["error_kind"], reply["finish_reason"]) == (
        "blocked", "content_filter")
    reply, _ = call(fake, "[[empty:1]] [[gold:3]]")
    assert reply is not None and (reply["error_kind"], reply["retryable"]) == ("empty", True)
    reply, _ = call(fake, "[[empty:1]] [[gold:3]]")  # the retry
    assert reply is not None and reply["error_kind"] is None and "boxed{3}" in reply["text"]


def test_three_samples_get_seed_plus_index_and_differ(fake: FakeGemini) -> None:
    settings = {**BASE, "seed": 10}
    replies = [call(fake, "[[by_seed:a,b,c]]", settings, sample=j)[0] for j in range(3)]
    assert [r["text"][-4:-1] for r in replies if r] == ["{b}", "{c}", "{a}"]  # 10, 11, 12
    assert [r.body["generationConfig"]["seed"] for r in fake.records] == [10, 11, 12]


def test_cached_content_tokens(fake: FakeGemini) -> None:
    reply, _ = call(fake, "one two [[cached:50]]")
    assert reply is not None and reply["usage"]["cache_read_tokens"] == 50


def test_invalid_key_is_fatal_and_key_echo_reaches_message_and_reply(fake: FakeGemini) -> None:
    fake.api_key = KEY
    _, error = call(fake, "[[gold:1]]", key="AIzaWrong")
    assert error is not None and (error.action, error.status) == ("fatal", 400)
    assert "API key not valid" in error.message
    _, error = call(fake, "[[echo_key]]")
    assert error is not None and KEY in error.message  # the transport must scrub it
    reply, _ = call(fake, "[[echo_key:reply]] [[gold:1]]")
    assert reply is not None and KEY in reply["text"]


def test_failed_precondition_is_fatal(fake: FakeGemini) -> None:
    def no_free_tier(rec: Any) -> Reply:
        reply = fake.error(400, "User location is not supported for the API use without a "
                           "billing account linked.")
        reply.body["error"]["status"] = "FAILED_PRECONDITION"  # type: ignore[index]
        return reply

    fake.responder = no_free_tier
    _, error = call(fake, "x")
    assert error is not None and (error.action, error.status) == ("fatal", 400)


def test_wrong_model_is_fatal(fake: FakeGemini) -> None:
    fake.responder = lambda rec: fake.error(404, "models/gemini-nope is not found for API "
                                            "version v1beta")
    _, error = call(fake, "x")
    assert error is not None and (error.action, error.status) == ("fatal", 404)


def test_sdk_default_api_version_is_v1(fake: FakeGemini) -> None:
    # Why the transport pins api_version: google-genai 3.6.1 posts to /v1 by default.
    c = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=fake.base_url))
    c.models.generate_content(model="gemini-fake", contents="[[gold:1]]")
    assert fake.records[-1].path == "/v1/models/gemini-fake:generateContent"


def test_kwargs_are_plain_deterministic_and_checked() -> None:
    messages = [{"role": "user", "content": "q"}]
    first = generate_kwargs(section({**THOUGHTS, "seed": 3}), messages, sample=2)
    assert json.dumps(first, sort_keys=True) == json.dumps(
        generate_kwargs(section({**THOUGHTS, "seed": 3}), messages, sample=2), sort_keys=True)
    assert first["config"]["seed"] == 5 and first["config"]["automatic_continuation"] is False
    assert "seed" not in generate_kwargs(section(BASE), messages, sample=2)["config"]
    assert set(GeminiParams.model_fields) >= {"model", "max_output_tokens", "temperature",
                                              "top_p", "system_prompt", "thinking_config",
                                              "seed"}
    with pytest.raises(ValueError, match="thinking_config takes only"):
        generate_kwargs(section({**BASE, "thinking_config": {"budget": 5}}), messages)
    # The typed section refuses an unknown key (issue 31: translate takes it).
    with pytest.raises(ConfigError, match=r"predict\.gemini\.max_tokens: unknown key"):
        generate_kwargs(section({**BASE, "max_tokens": 5}), messages)
