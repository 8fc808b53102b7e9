"""Backend lookup through the ``rimo_eval.predictors`` entry-point group."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import EntryPoint, PackageNotFoundError, distribution, entry_points
from typing import Any

from rimo_eval.errors import ConfigError
from rimo_eval.params.config import PREDICTOR_GROUP, PredictParams
from rimo_eval.params.section import Section
from rimo_eval.predictors.base import Predictor

GROUP = PREDICTOR_GROUP  # defined with the params models, which admit plugin sections
DISTRIBUTION = "rimo-eval"


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def available_backends() -> list[str]:
    return sorted(_entry_points())


def _own_entry_points() -> dict[str, EntryPoint]:
    """The built-in backends, from this package's own metadata: one file, where the full
    lookup reads every installed distribution's."""
    try:
        return {ep.name: ep for ep in distribution(DISTRIBUTION).entry_points.select(group=GROUP)}
    except PackageNotFoundError:
        return {}


def predictor_class(name: str) -> type[Predictor]:
    eps = _own_entry_points()
    if name not in eps:  # a plugin's backend (a built-in name cannot be taken by one)
        eps = _entry_points()
    if name not in eps:
        known = ", ".join(sorted(eps)) or "none (is rimo-eval installed?)"
        raise ConfigError(f"params.yaml: predict.backend '{name}' is not registered; "
                          f"known: {known}")
    cls = eps[name].load()
    if not (isinstance(cls, type) and issubclass(cls, Predictor)):
        raise ConfigError(f"entry point '{name}' ({eps[name].value}) is not a Predictor subclass")
    return cls


def create_predictor(name: str, config: Section | Mapping[str, Any] | None = None
                     ) -> Predictor:
    return predictor_class(name)(config)


def build_predictor(params: PredictParams, backend: str | None = None) -> Predictor:
    """The backend ``predict`` configures (default: the selected one), with its ``samples``:
    what the predict stage runs and what ``audit`` recomputes the fingerprint of."""
    predictor = create_predictor(backend or params.backend, params.backend_config(backend))
    predictor.samples = params.samples
    return predictor
