"""Reasoning models and repeated samples in the chat engine, against the loopback server:
reasoning fields, the ``<think>`` split, truncation, context-length errors, the 400 that stops
the stage, ``predict.samples`` and the token counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from rimo_eval.artifacts.items import Item
from rimo_eval.errors import StageError
from rimo_eval.predictors.base import Prediction
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from tests.support.chat_server import ChatServer, echo_reply
from tests.support.factories import backend_section
from tests.support.openai_backend import (
    KEY_ENV,
    SECRET,
    gold_items,
    make_config,
    n_item,
    p_item,
    run,
)

pytestmark = [pytest.mark.chat_server(hang_s=60.0), pytest.mark.api_key(KEY_ENV, SECRET)]


def run_k(config: dict, items: list[Item], k: int) -> dict[tuple[str, int], Prediction]:
    predictor = OpenAIPredictor(backend_section("openai", config))
    predictor.samples = k
    preds = predictor.predict(items)
    assert len(preds) == k * len(items)
    return {(p.problem_id, p.sample): p for p in preds}


# --- reasoning text ---------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_field_is_kept_apart_and_its_box_ignored(server: ChatServer, tmp_path: Path,
                                                           field: str) -> None:
    server.reasoning_field = field
    item = n_item("a", "Find x. [[reasoning:7]] [[gold:42]]")
    a = run(make_config(server, tmp_path), [item])["a"]
    assert (a.status, a.prediction) == ("ok", "42")
    assert r"\boxed{7}" in a.details["reasoning"] and r"\boxed{7}" not in a.details["text"]
    # usage.completion_tokens_details.reasoning_tokens (the server counts words)
    reasoning_words = len(a.details["reasoning"].split())
    assert a.details["usage"]["reasoning_tokens"] == reasoning_words
    assert a.details["usage"]["completion_tokens"] == reasoning_words + len(
        a.details["text"].split())
    assert a.details["requests"] == 1


def test_think_block_is_split_off_content(server: ChatServer, tmp_path: Path) -> None:
    preds = run(make_config(server, tmp_path),
                [n_item("a", "Find x. [[think:7]] [[gold:42]]"), n_item("b", "[[think_open:7]]")])
    a, b = preds["a"], preds["b"]
    assert a.prediction == "42" and a.details["extraction"] == "boxed"
    assert a.details["reasoning"].startswith("Maybe \\boxed{7}")
    assert a.details["text"].startswith("Working through") and "<think>" in a.details["raw_text"]
    assert a.details["usage"]["reasoning_tokens"] == 0  # the server did not count any
    # Cut off while still thinking: the guess inside the open block is never the answer.
    assert (b.status, b.prediction, b.details["extraction"]) == ("ok", "", "truncated")
    assert b.details["text"] == "" and "First guess" in b.details["reasoning"]


def test_think_split_can_be_turned_off(server: ChatServer, tmp_path: Path) -> None:
    config = make_config(server, tmp_path, think_split={"enabled": False})
    b = run(config, [n_item("b", "[[think_open:7]]")])["b"]
    assert b.prediction == "7" and b.details["reasoning"] is None  # the risk the split removes


def test_rimo_p_passes_on_the_answer_not_the_thoughts(server: ChatServer, tmp_path: Path) -> None:
    p = run(make_config(server, tmp_path), [p_item("p", ["A [[think:9]]", "B"])])["p"]
    assert p.status == "ok" and "<think>" not in p.prediction[0]
    second = next(r for r in server.ok_records() if "Part 2 of 2" in r.prompt)
    assert p.prediction[0] in second.prompt and "Maybe" not in second.prompt
    assert p.details["requests"] == 2 and len(p.details["parts"]) == 2
    assert p.details["usage"]["completion_tokens"] == sum(
        part["usage"]["completion_tokens"] for part in p.details["parts"])


def test_length_cut_without_box_is_truncated(server: ChatServer, tmp_path: Path) -> None:
    preds = run(make_config(server, tmp_path, max_tokens=8),
                [n_item("t", "[[truncate]]"), p_item("p", ["A [[truncate]]", "B"])])
    t, p = preds["t"], preds["p"]
    assert (t.status, t.prediction, t.details["extraction"]) == ("ok", "", "truncated")
    assert t.details["finish_reason"] == "length"
    assert p.details["parts"][0]["extraction"] == "truncated"
    assert p.details["extraction"] == "truncated"


def test_context_length_is_that_items_error(server: ChatServer, tmp_path: Path) -> None:
    items = [p_item("p", ["A", "B [[context]]", "C"]), *gold_items(2)]
    preds = run(make_config(server, tmp_path), items)
    p = preds["p"]
    assert p.status == "error" and p.error.startswith("part 2 of 3:")
    assert "maximum context length" in p.error and "1 attempt" in p.error
    assert p.details["error_kind"] == "context_length" and p.details["failed_part"] == 2
    assert len(p.details["parts"]) == 1 and p.details["requests"] == 2
    assert preds["n1"].prediction == "7"
    assert not any("Part 3 of 3" in r.prompt for r in server.records)


# --- OpenAI reasoning models: parameters ------------------------------------------------------
@pytest.mark.parametrize(("overrides", "param"), [
    ({"max_tokens": 100, "temperature": None}, "max_tokens"),
    ({}, "temperature"),  # the default temperature 0.0
])
def test_rejected_parameter_stops_the_stage_at_once(server: ChatServer, tmp_path: Path,
                                                    overrides: dict, param: str) -> None:
    server.reasoning_model = True
    config = make_config(server, tmp_path, concurrency=2, max_retries=6, **overrides)
    with pytest.raises(StageError) as info:
        run(config, gold_items(40))
    message = str(info.value)
    assert f"'{param}'" in message and f"predict.openai.{param}" in message
    assert len(server.records) <= 2  # one per slot at most, never retried, never 40 items


def test_reasoning_model_params_sent_only_when_set(server: ChatServer, tmp_path: Path) -> None:
    server.reasoning_model = True
    config = make_config(server, tmp_path, temperature=None, max_completion_tokens=2000,
                         reasoning_effort="low")
    a = run(config, [n_item("a", "[[gold:3]]")])["a"]
    assert a.prediction == "3"
    body = server.ok_records()[0].body
    assert body is not None and "temperature" not in body and "max_tokens" not in body
    assert (body["max_completion_tokens"], body["reasoning_effort"]) == (2000, "low")


# --- repeated samples --------------------------------------------------------------------------
def test_k_samples_are_k_requests_with_their_own_seeds(server: ChatServer, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    items = [n_item("a", "[[by_seed:5,6,7]]"), p_item("p", ["A", "B"])]
    config = make_config(server, tmp_path, seed=10)
    preds = run_k(config, items, 3)
    # Sample j is sent seed 10 + j; the server's gold is the entry at seed % 3.
    assert [preds["a", j].prediction for j in range(3)] == ["6", "7", "5"]
    assert sorted(r.body["seed"] for r in server.ok_records() if "by_seed" in r.prompt) == [
        10, 11, 12]
    # RIMO-P: sample j of part 2 sees sample j of part 1.
    for j in range(3):
        part1, part2 = preds["p", j].prediction
        second = next(r for r in server.ok_records()
                      if "Part 2 of 2" in r.prompt and r.body["seed"] == 10 + j)
        assert part1 in second.prompt and part2 == echo_reply(second.prompt, 10 + j)
    assert len({preds["p", j].prediction[0] for j in range(3)}) == 3
    assert len(server.records) == 3 * (1 + 2)
    assert all("n" not in r.body for r in server.records)  # k requests, never n=k
    assert "9/9" in capsys.readouterr().err  # the progress bar counts every sample's calls
    # A second run is served from the cache, sample by sample.
    server.reset()
    again = run_k(config, items, 3)
    assert not server.records
    assert {k: p.prediction for k, p in again.items()} == {k: p.prediction
                                                         for k, p in preds.items()}


def test_samples_without_seed_are_still_distinct_requests(server: ChatServer,
                                                          tmp_path: Path) -> None:
    config = make_config(server, tmp_path)
    one = run_k(config, [n_item("a", "[[gold:4]]")], 1)
    assert len(server.records) == 1
    # k = 1 and sample 0 of k = 2 share a cache entry; only sample 1 is new.
    server.reset()
    two = run_k(config, [n_item("a", "[[gold:4]]")], 2)
    assert len(server.records) == 1
    assert two["a", 0].details == one["a", 0].details
    assert two["a", 1].details["request_sha256"] != two["a", 0].details["request_sha256"]
    assert (two["a", 0].sample, two["a", 1].sample) == (0, 1)


def test_run_stats_count_sent_and_cached(server: ChatServer, tmp_path: Path) -> None:
    config = make_config(server, tmp_path)
    items = [*gold_items(3), p_item("p", ["A", "B"])]
    predictor = OpenAIPredictor(backend_section("openai", config))
    predictor.samples = 2
    predictor.predict(items[:2])
    predictor.predict(items)
    stats = predictor.run_stats
    assert stats["tracks"]["RIMO-N"] == {"requests_sent": 2, "cached_replies": 4}
    assert stats["tracks"]["RIMO-P"] == {"requests_sent": 4, "cached_replies": 0}
    assert stats["samples"] == 2 and stats["wall_s"] >= 0


def test_resume_after_sigkill_works_per_sample(server: ChatServer, tmp_path: Path) -> None:
    import json
    import subprocess

    from tests.support.openai_backend import kill_when_stalled

    items = [*gold_items(6), *(p_item(f"p{i}", ["A", "B"]) for i in range(2))]
    k, total = 3, 3 * (6 + 2 * 2)
    # A seed makes the k requests of an item differ in body, so the server can tell them apart.
    config = {**make_config(server, tmp_path, concurrency=4, timeout_s=60.0, seed=0),
              "samples": k}
    argv, env, _hanging = kill_when_stalled(server, tmp_path, config, items, 12)
    assert 12 <= len(server.ok_records()) < total

    server.hang_after = None
    subprocess.run(argv, env=env, check=True, stderr=subprocess.DEVNULL, timeout=120)
    out = json.loads((tmp_path / "out.json").read_text())
    assert len(out) == k * len(items) and all(status == "ok" for status, _ in out.values())
    assert [out[f"n2#{j}" if j else "n2"][1] for j in range(k)] == ["14"] * k
    answered = server.answered()
    assert len(answered) == total and set(answered.values()) == {1}  # each once, over both runs
