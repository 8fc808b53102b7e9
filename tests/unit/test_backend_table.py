"""Each built-in backend is declared once (rimo_eval/params/backends.py): pyproject.toml's
entry points, PredictParams' backend fields, the registry and check-params' did-you-mean all
agree with that table."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from rimo_eval.errors import ConfigError
from rimo_eval.params.backends import BACKENDS, BUILTIN_BACKENDS, PREDICTOR_GROUP
from rimo_eval.params.config import PredictParams, load_params, parse_params, read_yaml
from rimo_eval.predictors.registry import available_backends, predictor_class

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_registers_exactly_the_table() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"][PREDICTOR_GROUP] == {s.name: s.predictor for s in BACKENDS}


def test_predict_params_has_one_section_per_backend_in_table_order() -> None:
    fields = PredictParams.model_fields
    backends = [name for name in fields if name in BUILTIN_BACKENDS]
    assert backends == list(BUILTIN_BACKENDS)
    for spec in BACKENDS:
        assert spec.params_model in fields[spec.name].annotation.__args__  # type: ignore[union-attr]
        assert spec.mark in fields[spec.name].metadata


@pytest.mark.parametrize("spec", BACKENDS, ids=lambda s: s.name)
def test_the_registry_loads_the_declared_class(spec) -> None:  # type: ignore[no-untyped-def]
    cls = predictor_class(spec.name)
    assert f"{cls.__module__}:{cls.__name__}" == spec.predictor
    assert spec.name in available_backends()


@pytest.mark.parametrize("name", BUILTIN_BACKENDS)
def test_did_you_mean_offers_each_built_in(name: str) -> None:
    data = read_yaml(ROOT / "params.yaml")
    data["predict"]["backend"] = name[:-1] + "x"  # one letter off
    with pytest.raises(ConfigError) as err:
        parse_params(data, ROOT / "params.yaml")
    message = str(err.value)
    assert f"did you mean {name}?" in message
    known = message.split("known: ")[1].split(" (and")[0].split(", ")
    assert set(BUILTIN_BACKENDS) <= set(known)


def test_the_project_params_read_with_the_built_table() -> None:
    params = load_params(ROOT / "params.yaml")
    assert params.predict.backend in BUILTIN_BACKENDS
