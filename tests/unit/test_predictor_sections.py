"""What a backend is given: a built-in its own typed section only, a plugin a PluginSection of
the keys as the file gives them; and the identity (the fingerprint) is the keys the file set,
as it was when backends were given plain dicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rimo_eval.errors import ConfigError
from rimo_eval.io.hashing import fingerprint
from rimo_eval.params.offline import ConstantParams
from rimo_eval.params.section import PluginSection
from rimo_eval.predictors import create_predictor
from rimo_eval.predictors.constant import ConstantPredictor
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from rimo_eval.predictors.registry import build_predictor
from tests.support.factories import backend_section, params, section

PLUGIN = """
from rimo_eval.predictors.base import Prediction, Predictor

class Echo(Predictor):
    name = "echo"

    def predict(self, items):
        return [Prediction(it.track, it.problem_id, "echo") for it in items]
"""
# Keys no built-in has, nested values, a null and a key named like a pydantic attribute.
KEYS: dict[str, Any] = {"anything": [1, 2], "nested": {"a": None, "b": [{"c": 1.5}]},
                        "model": "m", "copy": True}


@pytest.fixture
def echo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A plugin backend ``echo``, registered as a distribution on sys.path."""
    dist = tmp_path / "rimo_echo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rimo-echo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[rimo_eval.predictors]\necho = rimo_echo:Echo\n")
    (tmp_path / "rimo_echo.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "echo"


def test_a_plugin_gets_its_section_as_the_file_gives_it(echo: str) -> None:
    predict = params(predict={"backend": echo, echo: KEYS}).predict
    given = predict.backend_config()
    assert isinstance(given, PluginSection) and given.as_dict() == KEYS
    predictor = build_predictor(predict)
    assert type(predictor).__module__ == "rimo_echo"
    assert predictor.config == KEYS
    # The fingerprint of the dict it was given before PluginSection: unchanged.
    assert predictor.identity() == {"backend": "echo", "params": KEYS}
    # No section in the file: the plugin's defaults, an empty config.
    bare = build_predictor(params(predict={"backend": echo}).predict)
    assert bare.config == {} and bare.identity() == {"backend": "echo", "params": {}}


@pytest.mark.parametrize(("backend", "keys"), [
    ("constant", {"answer": "1"}), ("oracle", {}), ("openai", {"model": "m"}),
    ("local", {"max_tokens": 8}), ("anthropic", {"model": "m"}), ("gemini", {"model": "m"}),
])
def test_a_builtin_takes_only_its_own_typed_section(backend: str, keys: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="not dict"):
        create_predictor(backend, keys)  # type: ignore[arg-type]  # a plain dict: refused
    with pytest.raises(TypeError, match="PluginSection"):
        create_predictor(backend, PluginSection.model_validate(keys))
    assert create_predictor(backend, backend_section(backend, keys)).name == backend


def test_no_section_is_the_defaults_and_a_required_key_is_the_files_error() -> None:
    assert create_predictor("constant").identity() == {"backend": "constant", "params": {}}
    with pytest.raises(ConfigError, match=r"params\.yaml: predict\.replay\.path: "):
        create_predictor("replay")


def test_a_plugin_given_a_plain_dict_is_refused_too(echo: str) -> None:
    with pytest.raises(TypeError, match="Echo takes a params Section or None, not dict"):
        create_predictor(echo, {"anything": 1})  # type: ignore[arg-type]


def test_the_identity_is_the_keys_the_file_set() -> None:
    """Unset defaults stay out of a plain backend's params, as they did with a dict: the
    fingerprint of ``answer: "1"`` is the one that dict had, and a default set explicitly is a
    key the file set."""
    one = ConstantPredictor(section(ConstantParams, "predict.constant", answer="1"))
    assert one.identity() == {"backend": "constant", "params": {"answer": "1"}}
    assert fingerprint(one.identity()) == fingerprint(
        {"backend": "constant", "params": {"answer": "1"}})
    assert ConstantPredictor().identity() == {"backend": "constant", "params": {}}
    assert ConstantPredictor(section(ConstantParams, "predict.constant")).config == {}
    assert ConstantPredictor(section(ConstantParams, "predict.constant", answer="0")
                             ).identity()["params"] == {"answer": "0"}
    # A chat backend hashes its Result keys, each as set or else its default: an unset
    # default, the default written out and an operational key give one identity.
    base = {"base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": None}
    ident = OpenAIPredictor(backend_section("openai", base)).identity()
    assert ident == OpenAIPredictor(backend_section(
        "openai", base, temperature=ident["params"]["temperature"], concurrency=3)).identity()
    assert ident != OpenAIPredictor(backend_section("openai", base, temperature=0.5)).identity()
