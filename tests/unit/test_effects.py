"""Each predict and judge key is marked once, in its typed section (rimo_eval/params/effects.py),
and what tells "changes the results" from "operational" derives from the marks: the
predictions' fingerprint, the judge's endpoint identity, PREDICT_OUTPUT_KEYS and the predict
params dvc.yaml gives the predict, report and score stages (issue 31 §2)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from rimo_eval.judge.chat import endpoint_identity
from rimo_eval.params.chat import ChatParams, LocalParams, OpenAIParams
from rimo_eval.params.config import (
    PREDICT_COST_KEYS,
    PREDICT_OUTPUT_KEYS,
    JudgeParams,
    PredictParams,
    load_params,
)
from rimo_eval.params.effects import (
    Effect,
    Operational,
    Result,
    fields_marked,
    identity,
    key_paths,
    mark,
    marks,
    section_model,
)
from rimo_eval.params.section import Section
from rimo_eval.predictors.chat_predictor import ChatPredictor
from rimo_eval.predictors.registry import predictor_class
from tests.support.paths import REPO_ROOT

ROOTS: dict[str, type[BaseModel]] = {"predict": PredictParams, "judge": JudgeParams}


def walk(model: type[BaseModel], path: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """Every section under ``model`` (itself included), with its key path."""
    yield path, model
    for name in model.model_fields:
        inner = section_model(model, name)
        if inner is not None:
            yield from walk(inner, f"{path}.{name}")


@functools.cache
def dvc_stages() -> dict[str, Any]:
    return dict(yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"])


def dvc_params(stage: str) -> list[str]:
    return [k for k in dvc_stages()[stage].get("params") or [] if isinstance(k, str)]


def test_every_predict_and_judge_field_has_exactly_one_mark() -> None:
    seen = 0
    for root, model in ROOTS.items():
        for path, section in walk(model, root):
            for name, effect in marks(section).items():  # raises on a field with 0 or 2
                seen += 1
                inner = section_model(section, name)
                if effect is Effect.BY_KEY:
                    assert inner is not None, f"{path}.{name}: ByKey on a plain value"
                elif inner is not None:
                    # Marked as a whole: the section's own fields say the same.
                    assert set(marks(inner).values()) <= {effect}, f"{path}.{name}"
    assert seen > 80


def test_a_field_without_a_mark_or_with_two_is_refused() -> None:
    class Unmarked(OpenAIParams):
        logprobs: bool = False

    class Twice(Section):
        seed: Result[Operational[int]] = 0

    with pytest.raises(TypeError, match=r"Unmarked\.logprobs: marked 0 times"):
        key_paths(Unmarked, "predict.openai", Effect.RESULT)
    with pytest.raises(TypeError, match=r"Twice\.seed: marked 2 times"):
        mark(Twice, "seed")


def test_dvc_yaml_gives_predict_report_and_score_the_derived_keys() -> None:
    predict = [k for k in dvc_params("predict") if k.startswith("predict.")]
    assert predict == list(PREDICT_OUTPUT_KEYS)
    assert len(PREDICT_OUTPUT_KEYS) == 41  # predict.replay.format among them
    prices = [k for k in PREDICT_COST_KEYS if k.endswith(".price_per_mtok")]
    report = [k for k in dvc_params("report") if k.startswith("predict.")]
    assert report == [*PREDICT_OUTPUT_KEYS, *prices]
    score = [k for k in dvc_params("score") if k.startswith("predict.")]
    assert score == ["predict.limit", "predict.sample_seed", *PREDICT_COST_KEYS]
    # No stage reruns for an operational predict key.
    declared = [k for stage in ("predict", "score", "judge", "view", "report")
                for k in dvc_params(stage)]
    for key in key_paths(PredictParams, "predict", Effect.OPERATIONAL):
        assert not any(key == k or key.startswith(f"{k}.") for k in declared), key


@pytest.mark.parametrize("backend", ["openai", "local", "anthropic", "gemini"])
def test_the_fingerprint_holds_the_result_fields_and_dvc_their_keys(backend: str) -> None:
    cls = predictor_class(backend)
    assert issubclass(cls, ChatPredictor)
    model = cls.params_model
    results = fields_marked(model, Effect.RESULT)
    content = fields_marked(model, Effect.CONTENT)
    declared = {k for k in PREDICT_OUTPUT_KEYS if k.startswith(f"predict.{backend}.")}
    assert declared == {f"predict.{backend}.{k}" for k in results | content}
    assert set(identity(model())) == results


# What the hand-written lists kept out before issue 31 (predictors/chat_predictor.py's
# OPERATIONAL_KEYS plus the popped "n", and judge/chat.py's _NOT_IDENTITY): the marks must
# give the very same fingerprints. max_reply_bytes (issue 42), operational and new since, is
# left out too: adding it changed no fingerprint.
OLD_OPERATIONAL = frozenset({"timeout_s", "max_retries", "backoff_initial_s", "backoff_max_s",
                             "concurrency", "cache_dir", "api_key_env", "n_threads",
                             "model_cache_dir", "model_path", "price_per_mtok",
                             "breaker_window", "stall_warning_s", "batch", "n",
                             "max_reply_bytes"})
OLD_NOT_JUDGE_IDENTITY = frozenset({"timeout_s", "max_retries", "backoff_initial_s",
                                    "backoff_max_s", "concurrency", "cache_dir", "api_key_env",
                                    "breaker_window", "stall_warning_s", "enabled",
                                    "calibration", "max_reply_bytes"})


def _old(section: BaseModel, left_out: frozenset[str]) -> dict[str, Any]:
    merged = {**type(section)().model_dump(), **section.model_dump(exclude_unset=True)}
    return {k: v for k, v in merged.items() if k not in left_out}


def test_the_fingerprints_of_params_yaml_are_those_of_the_old_lists() -> None:
    params = load_params(REPO_ROOT / "params.yaml")
    for backend in ("openai", "local", "anthropic", "gemini"):
        section = getattr(params.predict, backend)
        assert identity(section) == _old(section, OLD_OPERATIONAL), backend
    judge = params.judge.model_copy(update={"model": "m"})
    assert endpoint_identity(judge) == _old(judge, OLD_NOT_JUDGE_IDENTITY)
    # think_split as the file wrote it (a partial one is not filled with defaults).
    partial = OpenAIParams.model_validate({"model": "m", "think_split": {"enabled": False}})
    assert identity(partial)["think_split"] == {"enabled": False}


def test_the_judge_identity_is_its_result_fields_the_endpoint_keys_of_predict_openai() -> None:
    ident = endpoint_identity(JudgeParams(model="m"))
    assert set(ident) == fields_marked(JudgeParams, Effect.RESULT)
    # The judge's endpoint is marked as predict.openai's: the keys they share, the same marks.
    assert set(ident) == fields_marked(ChatParams, Effect.RESULT)
    assert {k: mark(JudgeParams, k) for k in ChatParams.model_fields} == marks(ChatParams)
    # Its own switches decide whether and how much it runs, not what a call answers.
    assert fields_marked(JudgeParams, Effect.SWITCH) == {"enabled", "calibration"}
    assert set(JudgeParams.model_fields) - set(ident) == OLD_NOT_JUDGE_IDENTITY


def test_local_max_tokens_has_one_default_the_one_params_yaml_sets() -> None:
    written = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    assert LocalParams().max_tokens == written["predict"]["local"]["max_tokens"] == 256
