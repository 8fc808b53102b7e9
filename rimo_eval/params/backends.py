"""Each built-in backend, declared once: its name, its params section, its predictor class and
the model its section names.

Everything else derives from this table: ``PredictParams``' backend fields (params/config.py),
the built-in names check-params' did-you-mean offers, the classes the registry loads
(predictors/registry.py), and the model a run is shown under (artifacts/model_name.py).
pyproject.toml's ``rimo_eval.predictors`` entry points list the same names and classes, for
plugins share that group: tests/unit/test_backend_table.py holds them to this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rimo_eval.params.chat import AnthropicParams, GeminiParams, LocalParams, OpenAIParams
from rimo_eval.params.effects import Effect
from rimo_eval.params.offline import ConstantParams, OracleParams, ReplayParams
from rimo_eval.params.section import Section

PREDICTOR_GROUP = "rimo_eval.predictors"  # the entry-point group backends register in
PACKAGED_LOCAL = "gemma-3-270m (packaged)"


def served_model(section: Mapping[str, Any]) -> Any:
    """The ``model`` key: openai's, anthropic's, gemini's, and a plugin's."""
    return section.get("model")


@dataclass(frozen=True)
class BackendSpec:
    name: str
    params_model: type[Section]
    predictor: str  # "module:Class", the entry point's value
    # The model ``predict.<name>`` names (a recorded ``backend_params`` reads the same), None
    # where the backend has none of its own: it is then named by itself.
    model: Callable[[Mapping[str, Any]], Any] = served_model
    # How its keys count (params/effects.py): each its own key, or the section as one.
    mark: Effect = Effect.BY_KEY


_P = "rimo_eval.predictors"
# In PredictParams' field order (dvc.yaml lists the predict keys in it).
BACKENDS: tuple[BackendSpec, ...] = (
    BackendSpec("local", LocalParams, f"{_P}.local_model:LocalModelPredictor",
                lambda s: s.get("model_path") or PACKAGED_LOCAL),
    BackendSpec("openai", OpenAIParams, f"{_P}.openai_chat:OpenAIPredictor"),
    BackendSpec("oracle", OracleParams, f"{_P}.oracle:OraclePredictor", lambda s: None),
    BackendSpec("constant", ConstantParams, f"{_P}.constant:ConstantPredictor",
                lambda s: f"constant {s['answer']!r}" if "answer" in s else None,
                mark=Effect.RESULT),
    BackendSpec("replay", ReplayParams, f"{_P}.replay:ReplayPredictor",
                lambda s: s.get("path")),
    BackendSpec("anthropic", AnthropicParams, f"{_P}.native_chat:AnthropicPredictor"),
    BackendSpec("gemini", GeminiParams, f"{_P}.native_chat:GeminiPredictor"),
)
BY_NAME: dict[str, BackendSpec] = {spec.name: spec for spec in BACKENDS}
BUILTIN_BACKENDS = tuple(BY_NAME)

