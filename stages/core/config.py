"""``params.yaml``, read and validated once (by the CLI) into typed, frozen sections.

Every section is a pydantic model with ``extra="forbid"`` and strict types, so a typo
(``predict.openai.temprature``), a missing section or ``predict.limit: true`` is a ConfigError
naming the key path, never a traceback deep inside a stage.

Backend sections: the built-in backends (local, openai, oracle, constant, replay) have models
here. A plugin backend registered in the ``rimo_eval.predictors`` entry-point group may have
its own ``predict.<name>`` mapping; it is passed through as a dict and the plugin class checks
it. Any other unknown key under ``predict`` is refused, so a misspelt built-in section is not
silently ignored. Values from YAML are kept as written (an ``int`` stays an ``int`` where a
number is allowed) so that a backend's fingerprint does not change with validation.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from stages.core.artifacts import PARAMS_PATH
from stages.core.errors import ConfigError

DEFAULT_PARAMS = PARAMS_PATH
PREDICTOR_GROUP = "rimo_eval.predictors"  # the entry-point group backends register in
BUILTIN_BACKENDS = ("local", "openai", "oracle", "constant", "replay", "anthropic", "gemini")
# The predict params that change the predictions, listed by key as the predict stage's (and the
# report's) params in dvc.yaml. The rest are operational (concurrency, timeouts, retries,
# cache_dir, breaker, allow_errors): changing one reruns nothing. tests/e2e/test_params_by_key.py
# holds dvc.yaml to this list.
PREDICT_OUTPUT_KEYS = (
    "predict.backend", "predict.limit", "predict.sample_seed", "predict.samples",
    "predict.constant", "predict.replay.path",
    *(f"predict.openai.{k}" for k in (
        "base_url", "model", "temperature", "top_p", "max_tokens", "max_completion_tokens",
        "reasoning_effort", "seed", "think_split", "extra_body", "system_prompt")),
    *(f"predict.local.{k}" for k in (
        "model_path", "n_ctx", "max_tokens", "temperature", "seed", "system_prompt")),
    *(f"predict.anthropic.{k}" for k in (
        "base_url", "model", "max_tokens", "temperature", "top_p", "system_prompt", "thinking",
        "effort", "api_version")),
    *(f"predict.gemini.{k}" for k in (
        "base_url", "model", "max_output_tokens", "temperature", "top_p", "system_prompt",
        "thinking_config", "seed")),
)

# YAML writes 60 and 60.0 alike for a number; keep what was written (no int -> float coercion).
Number = int | float
NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(ge=1)]
PosNumber = Annotated[Number, Field(gt=0)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    def as_dict(self) -> dict[str, Any]:
        """The keys the file set, as plain data: what a backend or a fingerprint sees."""
        return self.model_dump(mode="python", exclude_unset=True)


class FetchParams(Section):
    repo: str
    revision: str
    folder: str
    url_template: str
    mirrors: list[str] = []
    timeout_s: PosNumber = 60
    sha256: dict[str, Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")]]


class ValidateParams(Section):
    errata: Annotated[str, Field(min_length=1)]


class ConstantParams(Section):
    answer: str = "0"
    solution: str = ""


class ReplayParams(Section):
    path: Annotated[str, Field(min_length=1)]


class OracleParams(Section):
    pass


class ThinkSplit(Section):
    enabled: bool = True
    open: Annotated[str, Field(min_length=1)] = "<think>"
    close: Annotated[str, Field(min_length=1)] = "</think>"


class PricePerMtok(Section):
    input: Annotated[Number, Field(ge=0)]
    output: Annotated[Number, Field(ge=0)]


DEFAULT_RESPONSE_CACHE = ".rimo_cache/responses"


def _http_url(url: str | None) -> str | None:
    """An http(s) URL without credentials or a query: credentials come from the environment
    (in params they would be hashed, cached and written into the predictions)."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL")
    if parts.username or parts.password or parts.query:
        raise ValueError("must not carry credentials or a query string; put the key in the "
                         "variable named by api_key_env")
    return url


class ChatParams(Section):
    """An OpenAI-compatible chat endpoint and how to call it (predict.openai, judge). The
    defaults are the engine's: a key left out means this value."""

    base_url: str | None = "http://127.0.0.1:8000/v1"  # null: https://api.openai.com/v1
    model: str | None = None  # required by whoever sends (predict.openai, an enabled judge)
    # Every sampling parameter may be null: not sent (the server's default).
    temperature: Number | None = 0.0
    top_p: Number | None = None
    max_tokens: PosInt | None = None
    max_completion_tokens: PosInt | None = None  # OpenAI reasoning models, not max_tokens
    reasoning_effort: str | None = None  # low | medium | high, where the model takes it
    seed: NonNegInt | None = None  # sample j is sent seed + j
    # A leading <think>...</think> in the reply is reasoning, never the answer (null: off).
    think_split: ThinkSplit | None = ThinkSplit()
    extra_body: dict[str, Any] | None = {}
    system_prompt: str | None = None
    timeout_s: PosNumber = 1800.0  # per request: a reasoning model may think for many minutes
    max_retries: NonNegInt = 6
    backoff_initial_s: Annotated[Number, Field(ge=0)] = 1.0
    backoff_max_s: Annotated[Number, Field(ge=0)] = 60.0
    concurrency: PosInt = 16
    api_key_env: str | None = "OPENAI_API_KEY"  # the variable's NAME, never the key
    cache_dir: str | None = DEFAULT_RESPONSE_CACHE  # null: no response cache
    # Stop after this many transport failures in a row (0: never); warn when no request has
    # finished for this many seconds (null: never).
    breaker_window: NonNegInt = 20
    stall_warning_s: PosNumber | None = 120.0

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return _http_url(value)

    @field_validator("extra_body")
    @classmethod
    def _json_body(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"is not JSON: {exc}") from None
        return value


class BatchParams(Section):
    """predict.openai.batch: send through the OpenAI Batch API (stages/chat/batch). Operational:
    the replies, so the predictions, are those of the online path."""

    enabled: bool = False
    poll_s: PosNumber = 30.0  # between retrieves of a live batch
    completion_window: str = "24h"
    max_requests: PosInt = 50_000  # per batch (OpenAI's documented limit)
    max_bytes: PosInt = 200_000_000  # per input file (OpenAI: 200 MB)
    max_resubmits: NonNegInt = 2  # follow-up batches for a request in the error file
    fallback_online: bool = False  # then send it online instead of failing it
    discount: Annotated[Number, Field(ge=0, le=1)] = 0.5  # batch price = discount x price


class OpenAIParams(ChatParams):
    # Removed in favour of predict.samples: kept here so the backend can say so by name.
    n: PosInt | None = None
    price_per_mtok: PricePerMtok | None = None  # {input, output} USD per million tokens
    batch: BatchParams = BatchParams()


class NativeChatParams(Section):
    """A provider's own API through its official SDK (predict.anthropic, predict.gemini): the
    keys both share. Sampling keys default to null (not sent: the model's default)."""

    base_url: str | None = None  # null: the provider's public API
    model: str | None = None  # required
    temperature: Number | None = None
    top_p: Number | None = None
    system_prompt: str | None = None
    timeout_s: PosNumber = 1800.0  # per request: a thinking model may think for many minutes
    max_retries: NonNegInt = 6
    backoff_initial_s: Annotated[Number, Field(ge=0)] = 1.0
    backoff_max_s: Annotated[Number, Field(ge=0)] = 60.0
    concurrency: PosInt = 16
    api_key_env: str | None = None  # the variable's NAME, never the key
    cache_dir: str | None = DEFAULT_RESPONSE_CACHE
    breaker_window: NonNegInt = 20
    stall_warning_s: PosNumber | None = 120.0
    price_per_mtok: PricePerMtok | None = None  # thinking is billed as output

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return _http_url(value)


class AnthropicParams(NativeChatParams):
    """predict.anthropic: the Messages API (stages/chat/anthropic/translate.py says how each
    key is sent)."""

    max_tokens: PosInt = 16000  # required by the API; thinking counts against it
    # {type: enabled, budget_tokens: N}, {type: adaptive} or {type: disabled}, as the API
    # documents it; null: not sent.
    thinking: dict[str, Any] | None = None
    effort: str | None = None  # output_config.effort, for models that take it
    api_version: str | None = None  # the anthropic-version header; null: the SDK's
    api_key_env: str | None = "ANTHROPIC_API_KEY"


class GeminiParams(NativeChatParams):
    """predict.gemini: the Gemini API through google-genai (stages/chat/gemini/translate.py)."""

    max_output_tokens: PosInt | None = None  # thinking included; null: the model's default
    # {thinking_budget: N} or {thinking_level: low|high}, plus include_thoughts: true.
    thinking_config: dict[str, Any] | None = None
    seed: NonNegInt | None = None  # sample j is sent seed + j
    api_key_env: str | None = "GEMINI_API_KEY"


class LocalParams(Section):
    model_path: str | None = None  # null: the packaged Gemma 3 270M
    model_cache_dir: Annotated[str, Field(min_length=1)] = ".rimo_cache/models"
    n_ctx: PosInt = 8192
    n_threads: PosInt | None = None  # null: half the cores
    max_tokens: PosInt = 512
    temperature: Annotated[Number, Field(ge=0)] = 0.0
    seed: NonNegInt = 0
    system_prompt: str | None = None
    cache_dir: str | None = DEFAULT_RESPONSE_CACHE


BACKEND_MODELS: dict[str, type[Section]] = {
    "local": LocalParams, "openai": OpenAIParams, "oracle": OracleParams,
    "constant": ConstantParams, "replay": ReplayParams,
    "anthropic": AnthropicParams, "gemini": GeminiParams,
}


def plugin_backends() -> frozenset[str]:
    """Backends registered by other packages (the built-ins are registered too: not these)."""
    return frozenset(ep.name for ep in entry_points(group=PREDICTOR_GROUP)) - set(BUILTIN_BACKENDS)


class PredictParams(Section):
    # extra is allowed only to admit plugin sections; the validator below refuses the rest.
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    backend: Annotated[str, Field(min_length=1)]
    limit: NonNegInt | None = None
    sample_seed: int = 0
    samples: PosInt = 1
    # The share of items that may end in an error before the stage fails (checked below, so
    # that every wrong value gets the same message).
    allow_errors: Number = 0.05
    local: LocalParams | None = None
    openai: OpenAIParams | None = None
    oracle: OracleParams | None = None
    constant: ConstantParams | None = None
    replay: ReplayParams | None = None
    anthropic: AnthropicParams | None = None
    gemini: GeminiParams | None = None

    @field_validator("allow_errors", mode="before")
    @classmethod
    def _share(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"must be a share between 0 and 1, got {value!r}")
        return value

    @model_validator(mode="after")
    def _plugin_sections(self) -> PredictParams:
        extra = self.model_extra or {}
        if extra:
            plugins = plugin_backends()
            for key, value in extra.items():
                if key not in plugins:
                    raise ValueError(f"@{key}: unknown key (not a backend registered in "
                                     f"{PREDICTOR_GROUP})")
                if not isinstance(value, Mapping):
                    raise ValueError(f"@{key}: a backend section must be a mapping")
        return self

    def backend_config(self, name: str | None = None) -> Section | dict[str, Any] | None:
        """The section of backend ``name`` (default: the selected one): typed for a built-in
        backend, a dict for a plugin's (the plugin checks it), None when absent."""
        name = name or self.backend
        if name in BACKEND_MODELS:
            return getattr(self, name, None)
        value = (self.model_extra or {}).get(name)
        return None if value is None else dict(value)


class BootstrapParams(Section):
    samples: PosInt = 1000
    seed: int = 0
    confidence: Annotated[float, Field(gt=0, lt=1)] = 0.95


class ScoreParams(Section):
    bootstrap: BootstrapParams = BootstrapParams()
    pass_at: list[PosInt] = [1]


class JudgeCalibrationParams(Section):
    seed: int = 0
    limit: PosInt | None = None  # null: every gradable item


JUDGE_SYSTEM_PROMPT = "You are an expert mathematician and a strict judge of proofs."


class JudgeParams(ChatParams):
    """The opt-in RIMO-P judge: a chat endpoint (the shared keys) plus its own switches."""

    system_prompt: str | None = JUDGE_SYSTEM_PROMPT
    enabled: bool = False
    calibration: JudgeCalibrationParams = JudgeCalibrationParams()


class ReportParams(Section):
    worst_failures: NonNegInt = 10


class Params(Section):
    """The whole params file; ``path`` is where it was read from (the CLI's ``--params``)."""

    fetch: FetchParams
    validate_: ValidateParams = Field(alias="validate")  # 'validate' shadows a BaseModel name
    predict: PredictParams
    score: ScoreParams
    judge: JudgeParams = JudgeParams()  # absent: the judge is off
    report: ReportParams
    path: Path = Field(default=DEFAULT_PARAMS, exclude=True)

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="python", exclude_unset=True, by_alias=True)


def _key_path(data: Any, loc: tuple[int | str, ...]) -> list[str]:
    """The keys of ``loc`` that exist in the data: pydantic adds union members ('int',
    'float') and validator tags to a location, which are not keys of the file."""
    keys: list[str] = []
    for part in loc:
        name = "validate" if part == "validate_" else part
        in_list = isinstance(data, list) and isinstance(name, int) and name < len(data)
        if in_list or (isinstance(data, Mapping) and name in data):
            data = data[name]
        elif not keys or isinstance(data, Mapping):
            keys.append(str(name))  # a missing or unknown key: named, then stop
            break
        else:
            continue
        keys.append(str(name))
    return keys


def _message(err: Mapping[str, Any]) -> str:
    kind, msg = err["type"], str(err["msg"])
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing key"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    return f"{msg} (got {err['input']!r})"


def format_errors(path: str | os.PathLike[str], data: Any, exc: ValidationError) -> str:
    """One line per key path: ``params.yaml: predict.limit: <what is wrong>``."""
    by_key: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False):
        keys, msg = _key_path(data, tuple(err["loc"])), _message(err)
        # A validator names an extra key as "@key: message" (pydantic gives no location).
        if msg.startswith("@"):
            key, _, msg = msg[1:].partition(": ")
            keys.append(key)
        msgs = by_key.setdefault(".".join(keys) or "<top>", [])
        if msg not in msgs:
            msgs.append(msg)
    return "\n".join(f"{os.fspath(path)}: {key}: {' or '.join(msgs)}"
                     for key, msgs in sorted(by_key.items()))


def parse_params(data: Any, path: str | os.PathLike[str] = DEFAULT_PARAMS) -> Params:
    """Validate already-loaded params (a mapping) into typed sections."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{os.fspath(path)}: expected a mapping of stage sections at the "
                          "top level")
    if "path" in data:  # the field records where the file was read; the file cannot set it
        raise ConfigError(f"{os.fspath(path)}: path: unknown key")
    try:
        params = Params.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(path, data, exc)) from None
    return params.model_copy(update={"path": Path(path)})


def read_yaml(path: str | os.PathLike[str] = DEFAULT_PARAMS) -> Any:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh) or {}
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: params file not found (run from the project root)") from exc
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc


def load_params(path: str | os.PathLike[str] = DEFAULT_PARAMS) -> Params:
    return parse_params(read_yaml(path), path)


def coerce(model: type[Section], value: Section | Mapping[str, Any] | None, where: str
           ) -> Section:
    """A section from a typed object or a plain dict (how tests call the stage functions)."""
    if isinstance(value, model):
        return value
    data = {where: dict(value or {})}
    try:
        return model.model_validate(data[where])
    except ValidationError as exc:
        # Validated alone, the section's errors are located from its own key.
        wrapped = ValidationError.from_exception_data(exc.title, [
            {**e, "loc": (where, *e["loc"])} for e in exc.errors()])  # type: ignore[misc]
        raise ConfigError(format_errors(DEFAULT_PARAMS, data, wrapped)) from None
