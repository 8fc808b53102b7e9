"""New weights behind an old name and URL (issue 42 §6): what the server reports about the
weights (vLLM's ``root`` in ``GET /v1/models``) is part of every cache key, so a change is a
miss, said once, and going back finds the first weights' replies again. A server that reports
nothing beyond the name keeps the keys it always had."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.artifacts.items import Item
from rimo_eval.chat.cache import request_key
from rimo_eval.chat.probe import identity
from rimo_eval.params.section import Section
from rimo_eval.predictors.estimate import estimate
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from rimo_eval.rimo.tracks import TRACK_N
from tests.support.cache_tools import cache_entries
from tests.support.chat_server import ChatServer
from tests.support.factories import backend_section

SAID = "now reports other weights under 'sweep-model'"


def config(server: ChatServer, tmp_path: Path, model: str = "sweep-model") -> Section:
    return backend_section("openai", base_url=server.base_url, model=model, api_key_env=None,
                           cache_dir=str(tmp_path / "cache"), timeout_s=10.0, max_retries=0,
                           concurrency=4)


def items(count: int = 9) -> list[Item]:
    return [Item(TRACK_N, f"n{i}", f"Compute {i}.", "algebra", 1, True, f"h{i}",
                 answer=str(i)) for i in range(count)]


def vllm(root: str, name: str = "sweep-model") -> dict[str, Any]:
    """The card vLLM lists for ``--model ROOT --served-model-name NAME``."""
    return {"id": name, "object": "model", "created": 1, "owned_by": "vllm", "root": root,
            "parent": None, "max_model_len": 4096}


def run(server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        **overrides: Any) -> tuple[int, list[str], str]:
    """(requests sent, reply texts, stderr) of one predict run."""
    before = len(server.records)
    preds = OpenAIPredictor(config(server, tmp_path, **overrides)).predict(items())
    assert all(p.status == "ok" for p in preds)
    return len(server.records) - before, [p.details["raw_text"] for p in preds], \
        capsys.readouterr().err


def test_new_weights_behind_the_same_name_are_a_miss_said_once(
        server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.model_card = vllm("/models/A")
    sent, first, err = run(server, tmp_path, capsys)
    assert sent == 9 and SAID not in err
    assert run(server, tmp_path, capsys)[0] == 0  # the same weights: every reply cached

    server.model_card = vllm("/models/B")  # a second sweep: same port, same served name
    sent, _, err = run(server, tmp_path, capsys)
    assert sent == 9  # none of A's nine replies served
    said = [line for line in err.splitlines() if SAID in line]
    assert said == [f"predict.openai: the server at {server.base_url} {SAID} than when this "
                    "cache last asked (root \"/models/A\" then, root \"/models/B\" now): only "
                    "replies made with these weights are served from the cache, the others "
                    "are requested again"]
    assert run(server, tmp_path, capsys)[:1] == (0,)  # B's replies now cached, nothing said

    server.model_card = vllm("/models/A")  # back to A: its replies, not B's
    sent, again, err = run(server, tmp_path, capsys)
    assert sent == 0 and again == first
    assert len([line for line in err.splitlines() if SAID in line]) == 1
    entries = cache_entries(tmp_path / "cache")
    assert len(entries) == 18
    assert sorted({e.request["served"]["root"] for e in entries if e.request}) == [
        "/models/A", "/models/B"]


def test_a_warm_cache_and_the_offline_readers_use_the_weights_seen_last(
        server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.model_card = vllm("/models/B")
    cfg = config(server, tmp_path)
    first = OpenAIPredictor(cfg).predict(items())
    server.stop()  # no server: the keys still name B, the weights it reported last
    assert OpenAIPredictor(cfg).predict(items()) == first
    assert estimate(OpenAIPredictor(cfg), items()).as_dict()["tracks"][TRACK_N]["cached"] == 9


def test_a_server_that_reports_nothing_new_keeps_todays_keys(
        server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM without ``--served-model-name`` (the name is the root), OpenAI (no root), a server
    without ``/models``: the payload has no ``served`` part, so its key is the one it had
    before this change and an existing cache keeps hitting."""
    for card, model in ((vllm("org/model-7b", "org/model-7b"), "org/model-7b"),
                        ({"id": "gpt-x", "object": "model", "owned_by": "system"}, "gpt-x"),
                        (None, "no-models")):
        server.model_card, server.serve_models = card, card is not None
        run(server, tmp_path, capsys, model=model)
        for entry in cache_entries(tmp_path / "cache"):
            assert entry.request is not None and "served" not in entry.request
            assert entry.key == request_key({"endpoint": entry.request["endpoint"],
                                             "request": entry.request["request"]})
    assert len(cache_entries(tmp_path / "cache")) == 27


def test_a_hostile_root_reaches_the_terminal_escaped(
        server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.model_card = vllm("/models/A")
    run(server, tmp_path, capsys)
    server.model_card = vllm("/m\x1b]0;owned\x07\x9b2J")
    err = run(server, tmp_path, capsys)[2]
    said = next(line for line in err.splitlines() if SAID in line)
    assert "\x1b" not in said and "\x9b" not in said and "\x07" not in said
    assert 'root "/m\\u001b]0;owned\\u0007\\u009b2J" now' in said


def test_a_server_answering_every_name_with_its_one_model(
        server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """llama_cpp.server lists its one model (its path, or an alias) and answers any name with
    it: a new file behind the same URL is a miss too."""
    server.model_card = {"id": "/gguf/a.gguf", "object": "model", "owned_by": "me"}
    assert run(server, tmp_path, capsys, model="local")[0] == 9
    server.model_card = {"id": "/gguf/b.gguf", "object": "model", "owned_by": "me"}
    sent, _, err = run(server, tmp_path, capsys, model="local")
    assert sent == 9 and '(id "/gguf/a.gguf" then, id "/gguf/b.gguf" now)' in err


@pytest.mark.parametrize(("models", "name", "expected"), [
    # SGLang: id is the served name, root the model path
    ({"data": [{"id": "m", "root": "/w/qwen", "max_model_len": 8}]}, "m", {"root": "/w/qwen"}),
    # vLLM LoRA: the adapter's path and its base
    ({"data": [{"id": "base", "root": "base"}, {"id": "ad", "root": "/l/ad", "parent": "base"}]},
     "ad", {"root": "/l/ad", "parent": "base"}),
    # llama.cpp's llama-server: an alias, and the weights' sizes under meta
    ({"data": [{"id": "m", "meta": {"n_params": 268098176, "size": 253231104,
                                    "n_vocab": 262144, "nested": {"x": 1}}}]}, "m",
     {"meta": {"n_params": 268098176, "size": 253231104, "n_vocab": 262144}}),
    # OpenAI: many models, none with more than its name; an unknown name among many
    ({"data": [{"id": "gpt-x", "owned_by": "system"}, {"id": "gpt-y"}]}, "gpt-x", {}),
    ({"data": [{"id": "gpt-x"}, {"id": "gpt-y"}]}, "other", {}),
    # not a model list at all
    ({"error": "no"}, "m", {}), ([1, 2], "m", {}),
    # a hostile root: kept as its hash, not a megabyte in every entry
    ({"data": [{"id": "m", "root": "r" * 2000}]}, "m",
     {"root": "sha256:" + hashlib.sha256(b"r" * 2000).hexdigest()}),
])
def test_what_servers_report(models: Any, name: str, expected: dict[str, Any]) -> None:
    assert identity(models, name) == expected
