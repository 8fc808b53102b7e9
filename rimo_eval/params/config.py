"""``params.yaml``, read and validated once (by the CLI) into typed, frozen sections.

Every section is a pydantic model with ``extra="forbid"`` and strict types, so a typo
(``predict.openai.temprature``, named with the nearest known key), a missing section or
``predict.limit: true`` is a ConfigError naming the key path, never a traceback deep inside a
stage. So are what no type catches, anywhere in the tree: NaN and infinities, lone UTF-16
surrogates (value_problems), and a key given twice in the file (yaml_file, with both lines).

Backend sections: each built-in backend's model comes from its one declaration in
params/backends.py, which PredictParams' fields are built from. A plugin backend registered
in the ``rimo_eval.predictors`` entry-point group may have its own ``predict.<name>`` mapping;
it is passed through as a PluginSection and the plugin class checks it. Any other unknown key
under ``predict`` is refused, so a misspelt built-in section is not silently ignored. Values from
YAML are kept as written (an ``int`` stays an ``int`` where a number is allowed) so that a backend's
fingerprint does not change with validation.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Self, TypeVar

import yaml
from pydantic import (
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from rimo_eval.artifacts.paths import PARAMS_PATH
from rimo_eval.errors import ConfigError
from rimo_eval.io.input_files import check_input
from rimo_eval.io.surrogates import escaped, first_lone_surrogate, split_pair
from rimo_eval.params.backends import BACKENDS, BUILTIN_BACKENDS, BY_NAME, PREDICTOR_GROUP
from rimo_eval.params.chat import ChatParams
from rimo_eval.params.cutoff import cutoff_text
from rimo_eval.params.effects import Effect, Operational, Result, Switch, key_paths
from rimo_eval.params.head import committed_params, origin_hint, quoting_hint
from rimo_eval.params.keys import nearest
from rimo_eval.params.section import NonNegInt, Number, PluginSection, PosInt, PosNumber, Section
from rimo_eval.params.yaml_file import DuplicateKeyError, load_unique

DEFAULT_PARAMS = PARAMS_PATH
S = TypeVar("S", bound=Section)  # parse_section: the section model asked for, typed as such
class FetchParams(Section):
    repo: str
    revision: str
    folder: str
    url_template: str
    mirrors: list[str] = Field(default_factory=list)
    timeout_s: PosNumber = 60
    sha256: dict[str, Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")]]


class ValidateParams(Section):
    errata: Annotated[str, Field(min_length=1)]

    @field_validator("errata")
    @classmethod
    def _errata(cls, value: str) -> str:
        check_input(value)
        return value


def plugin_backends() -> frozenset[str]:
    """Backends registered by other packages (the built-ins are registered too: not these)."""
    return frozenset(ep.name for ep in entry_points(group=PREDICTOR_GROUP)) - set(BUILTIN_BACKENDS)


def _known_backend(value: str) -> None:
    """Here, not only when predict builds it, so that check-params passes no misspelt backend.
    The installed distributions are read only for a name not built in."""
    if value in BUILTIN_BACKENDS:
        return
    known = sorted({*BUILTIN_BACKENDS, *plugin_backends()})
    if value in known:
        return
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    raise ValueError(f"@backend: unknown backend {value!r}; {hint}known: {', '.join(known)} (and "
                     f"any a plugin registers in the {PREDICTOR_GROUP} entry-point group)")


class _PredictKeys(Section):
    """predict's own keys; PredictParams adds one section per built-in backend (below)."""

    # extra is allowed only to admit plugin sections; the validator below refuses the rest.
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    backend: Result[Annotated[str, Field(min_length=1)]]
    limit: Result[NonNegInt | None] = None
    sample_seed: Result[int] = 0
    samples: Result[PosInt] = 1
    # The share of items that may end in an error before the stage fails (checked below, so
    # that every wrong value gets the same message).
    allow_errors: Operational[Number] = 0.05

    @field_validator("allow_errors", mode="before")
    @classmethod
    def _share(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"must be a share between 0 and 1, got {value!r}")
        return value

    @model_validator(mode="after")
    def _plugin_sections(self) -> Self:
        extra = self.model_extra or {}
        if extra:
            plugins = plugin_backends()
            for key, value in extra.items():
                if key not in plugins:
                    raise ValueError(f"@{key}: unknown key (not a backend registered in "
                                     f"{PREDICTOR_GROUP})")
                if not isinstance(value, Mapping):
                    raise ValueError(f"@{key}: a backend section must be a mapping")
                if not all(isinstance(name, str) for name in value):  # a PluginSection's keys
                    raise ValueError(f"@{key}: a backend section's keys must be strings")
        _known_backend(self.backend)
        return self

    def backend_config(self, name: str | None = None) -> Section | None:
        """The section of backend ``name`` (default: the selected one): typed for a built-in
        backend, a PluginSection for a plugin's (the plugin checks it), None when absent."""
        name = name or self.backend
        if name in BY_NAME:
            section: Section | None = getattr(self, name, None)
            return section
        value = (self.model_extra or {}).get(name)
        return None if value is None else PluginSection.model_validate(dict(value))


# The backend sections, from the table (params/backends.py), each ``predict.<name>``, absent
# by default. Statically PredictParams is its own keys: a section is read by backend_config.
if TYPE_CHECKING:
    PredictParams = _PredictKeys
else:
    PredictParams = create_model(
        "PredictParams", __base__=_PredictKeys, __module__=__name__,
        __doc__=_PredictKeys.__doc__,
        **{spec.name: (Annotated[spec.params_model | None, spec.mark], None)
           for spec in BACKENDS})


class BootstrapParams(Section):
    samples: PosInt = 1000
    seed: int = 0
    confidence: Annotated[float, Field(gt=0, lt=1)] = 0.95


class ScoreParams(Section):
    bootstrap: BootstrapParams = BootstrapParams()
    pass_at: list[PosInt] = Field(default_factory=lambda: [1])
    # The model's training cutoff (YYYY, YYYY-MM or YYYY-MM-DD): metadata of the score stage
    # only, so setting it never reruns predict. Items of later competitions: "unseen".
    training_cutoff: str | None = None

    @field_validator("training_cutoff", mode="before")
    @classmethod
    def _cutoff(cls, value: Any) -> str | None:
        return cutoff_text(value)


class JudgeCalibrationParams(Section):
    seed: Switch[int] = 0
    limit: Switch[PosInt | None] = None  # null: every gradable item


JUDGE_SYSTEM_PROMPT = "You are an expert mathematician and a strict judge of proofs."


class JudgeParams(ChatParams):
    """The opt-in RIMO-P judge: a chat endpoint (the shared keys) plus its own switches."""

    system_prompt: Result[str | None] = JUDGE_SYSTEM_PROMPT
    enabled: Switch[bool] = False
    calibration: Switch[JudgeCalibrationParams] = JudgeCalibrationParams()


# The predict params that change the predictions (derived from the marks, params/effects.py),
# listed by key as the predict stage's (and the report's) params in dvc.yaml. The rest are
# operational (concurrency, timeouts, retries, cache_dir, breaker, allow_errors) or prices:
# changing one reruns nothing. tests/unit/test_effects.py and tests/e2e/test_params_by_key.py
# hold dvc.yaml to this list.
PREDICT_OUTPUT_KEYS = key_paths(PredictParams, "predict", Effect.RESULT, Effect.CONTENT)
# The prices the score stage's cost estimate reads (score's params in dvc.yaml).
PREDICT_COST_KEYS = key_paths(PredictParams, "predict", Effect.COST)


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


def value_problems(data: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """(key path, what is wrong) for values no type check catches, anywhere in the tree (a
    backend's free-form thinking or extra_body too): NaN and infinities, which fail later as
    "Out of range float values are not JSON compliant", and lone UTF-16 surrogates, which no
    UTF-8 file, request or table can hold."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            name = (*path, escaped(key))
            if isinstance(key, str) and first_lone_surrogate(key):
                yield ".".join(name), _surrogate_message("the key", key)
            yield from value_problems(value, name)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from value_problems(value, (*path, str(index)))
    elif isinstance(data, float) and not math.isfinite(data):
        yield ".".join(path), f"must be a finite number (got {data!r})"
    elif isinstance(data, str) and first_lone_surrogate(data):
        yield ".".join(path), _surrogate_message("the text", data)


def _surrogate_message(what: str, text: str) -> str:
    char, index = first_lone_surrogate(text) or ("", 0)
    pair = split_pair(text, index)
    # YAML's \u escapes are code points: it reads a UTF-16 pair as two lone surrogates.
    hint = (f" (YAML reads {escaped(text[index:index + 2])} as two: write {pair})" if pair
            else "")
    return (f"{what} holds a lone UTF-16 surrogate {escaped(char)} at character {index}, which "
            f"is not a character{hint}")


def _unknown(keys: list[str], msg: str) -> str:
    """``msg`` ("unknown key ...") with the nearest known key paths, when there are any."""
    near = nearest(Params, keys, {PredictParams: plugin_backends()})
    return f"unknown key; did you mean {' or '.join(f'`{k}`' for k in near)}?" if near else msg


def format_errors(path: str | os.PathLike[str], data: Any, exc: ValidationError | None,
                  problems: Mapping[str, str] | None = None, committed: Any = None) -> str:
    """One line per key path: ``params.yaml: predict.limit: <what is wrong>``. ``problems``
    are found before the type check (value_problems); for those keys they are all it says.
    ``committed`` (HEAD's file, params_head) adds where a value not committed came from."""
    by_key: dict[str, list[str]] = {key: [msg] for key, msg in (problems or {}).items()}
    key_paths: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False) if exc else []:
        keys, msg = _key_path(data, tuple(err["loc"])), _message(err)
        # A validator names an extra key as "@key: message" (pydantic gives no location).
        if msg.startswith("@"):
            key, _, msg = msg[1:].partition(": ")
            keys.append(key)
        if msg.startswith("unknown key"):
            msg = _unknown(keys, msg)
        if err["type"] == "string_type" and isinstance(err["input"], int | float) and keys:
            msg += quoting_hint(keys, err["input"])
        where = escaped(".".join(keys)) or "<top>"
        key_paths.setdefault(where, keys)
        if problems and where in problems:
            continue
        msgs = by_key.setdefault(where, [])
        if msg not in msgs:
            msgs.append(msg)
    name = Path(path).name
    hints = {where: origin_hint(name, keys, data, committed)
             for where, keys in key_paths.items()}
    return "\n".join(f"{os.fspath(path)}: {key}: {' or '.join(msgs)}"
                     + (f"\n  {hints[key]}" if hints.get(key) else "")
                     for key, msgs in sorted(by_key.items()))


def parse_params(data: Any, path: str | os.PathLike[str] = DEFAULT_PARAMS) -> Params:
    """Validate already-loaded params (a mapping) into typed sections."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{os.fspath(path)}: expected a mapping of stage sections at the "
                          "top level")
    if "path" in data:  # the field records where the file was read; the file cannot set it
        raise ConfigError(f"{os.fspath(path)}: path: unknown key")
    problems = dict(value_problems(data))
    try:
        params = Params.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(path, data, exc, problems,
                                        committed_params(path))) from None
    if problems:
        raise ConfigError(format_errors(path, data, None, problems, committed_params(path)))
    return params.model_copy(update={"path": Path(path)})


def read_yaml(path: str | os.PathLike[str] = DEFAULT_PARAMS) -> Any:
    """The file's YAML; a key given twice is an error naming both lines (yaml_file)."""
    path = Path(path)
    try:
        return load_unique(path.read_text(encoding="utf-8"), path) or {}
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: params file not found (run from the project root)") from exc
    except DuplicateKeyError as exc:
        raise ConfigError(str(exc)) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc


def load_params(path: str | os.PathLike[str] = DEFAULT_PARAMS) -> Params:
    return parse_params(read_yaml(path), path)


def parse_section(model: type[S], data: Mapping[str, Any] | None, where: str) -> S:
    """One section, validated from plain data (another revision's file, a test's partial
    section) as parse_params validates it in the whole file: errors name ``where``'s keys."""
    data = {where: dict(data or {})}
    problems = dict(value_problems(data))
    try:
        section = model.model_validate(data[where])
    except ValidationError as exc:
        # Validated alone, the section's errors are located from its own key. (errors()' dicts
        # carry msg and url too, which InitErrorDetails does not declare; pydantic ignores them.)
        wrapped = ValidationError.from_exception_data(exc.title, [
            {**e, "loc": (where, *e["loc"])} for e in exc.errors()])  # type: ignore[typeddict-unknown-key]
        raise ConfigError(format_errors(DEFAULT_PARAMS, data, wrapped, problems)) from None
    if problems:
        raise ConfigError(format_errors(DEFAULT_PARAMS, data, None, problems))
    return section
