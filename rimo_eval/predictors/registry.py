"""Backend lookup: a built-in from its declaration (params/backends.py), a plugin through the
``rimo_eval.predictors`` entry-point group."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from rimo_eval.errors import ConfigError
from rimo_eval.params.backends import BY_NAME, PREDICTOR_GROUP
from rimo_eval.params.config import PredictParams
from rimo_eval.params.section import Section
from rimo_eval.predictors.base import Predictor

GROUP = PREDICTOR_GROUP  # defined with the backend table, which the params models are built from


def _entry_points() -> dict[str, EntryPoint]:
    """Every backend a distribution registers: the built-ins (a built-in name cannot be taken
    by a plugin: the table's class wins) and the plugins."""
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    return {**found, **{name: EntryPoint(name, spec.predictor, GROUP)
                        for name, spec in BY_NAME.items()}}


def available_backends() -> list[str]:
    return sorted(_entry_points())


def predictor_class(name: str) -> type[Predictor]:
    # A built-in is loaded from the table, without reading every installed distribution.
    eps = {name: EntryPoint(name, BY_NAME[name].predictor, GROUP)} if name in BY_NAME \
        else _entry_points()
    if name not in eps:
        known = ", ".join(sorted(eps))
        raise ConfigError(f"params.yaml: predict.backend '{name}' is not registered; "
                          f"known: {known}")
    cls = eps[name].load()
    if not (isinstance(cls, type) and issubclass(cls, Predictor)):
        raise ConfigError(f"entry point '{name}' ({eps[name].value}) is not a Predictor subclass")
    return cls


def create_predictor(name: str, config: Section | None = None) -> Predictor:
    """Backend ``name`` given its section: a built-in's own typed one, a plugin's PluginSection
    (``PredictParams.backend_config`` gives either), None for its defaults."""
    return predictor_class(name)(config)


def build_predictor(params: PredictParams, backend: str | None = None) -> Predictor:
    """The backend ``predict`` configures (default: the selected one), with its ``samples``:
    what the predict stage runs and what ``audit`` recomputes the fingerprint of."""
    predictor = create_predictor(backend or params.backend, params.backend_config(backend))
    predictor.samples = params.samples
    return predictor
