"""What a params key does to the results, said once, on the field that holds it.

Every field of the predict and judge sections is declared with one mark, e.g.
``timeout_s: Operational[PosNumber] = 1800.0``; everything that must tell "changes the
results" from "operational" derives from the marks, never from a list of names kept by hand:

* the predictions' fingerprint (``predictors/chat_predictor.py``) and the judge's endpoint
  identity (``judge/chat.py``) hold the ``Result`` fields, each as the file set it, else its
  default (``identity``);
* the predict keys DVC reruns predict and report for (``config.PREDICT_OUTPUT_KEYS``, which
  dvc.yaml lists and tests/unit/test_effects.py holds it to) are the ``Result`` and ``Content``
  key paths (``key_paths``);
* the prices the score stage's cost estimate reads are the ``Cost`` key paths.

A field that holds a section is marked as a whole (``think_split: Result[ThinkSplit | None]``:
one key, every field of it a result) or ``ByKey`` (its own fields' marks count, each its own
key, as ``predict.openai.*``).

A new key is one field with its mark. One that changes the predictions (``Result``,
``Content``) is also added, in field order, to the predict and report params in dvc.yaml:
tests/unit/test_effects.py fails, naming it, until it is there (and fails on a field with no
mark).
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from inspect import isclass
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

T = TypeVar("T")


class Effect(Enum):
    # Changes what the model (or the judge) answers: in the fingerprint, and DVC reruns.
    RESULT = "result"
    # Names a file whose contents change the answers: DVC reruns when the name changes; the
    # fingerprint holds the file's sha256 (the backend's identity), not its name.
    CONTENT = "content"
    # Speed, robustness, where things are kept, which key to read: never an answer. In no
    # fingerprint, and no stage reruns for it.
    OPERATIONAL = "operational"
    # A price: the score stage's cost estimate, never an answer.
    COST = "cost"
    # Whether and how much the stage runs (judge.enabled, judge.calibration), never what one
    # call answers: out of the endpoint's identity (the stage's own params in dvc.yaml).
    SWITCH = "switch"
    # A key taken away, kept so that setting it gets a message naming its replacement.
    REMOVED = "removed"
    # A section whose own fields carry the marks, each its own key.
    BY_KEY = "by key"


Result = Annotated[T, Effect.RESULT]
Content = Annotated[T, Effect.CONTENT]
Operational = Annotated[T, Effect.OPERATIONAL]
Cost = Annotated[T, Effect.COST]
Switch = Annotated[T, Effect.SWITCH]
Removed = Annotated[T, Effect.REMOVED]
ByKey = Annotated[T, Effect.BY_KEY]


def mark(model: type[BaseModel], name: str) -> Effect:
    """The one mark of ``model``'s field ``name``; a field with none, or two, is an error."""
    found = [m for m in model.model_fields[name].metadata if isinstance(m, Effect)]
    if len(found) != 1:
        raise TypeError(f"{model.__name__}.{name}: marked {len(found)} times; give it exactly "
                        "one mark of rimo_eval.params.effects (Result, Operational, ...)")
    return found[0]


def marks(model: type[BaseModel]) -> dict[str, Effect]:
    """Each field of ``model`` (its own and those it inherits) and its mark."""
    return {name: mark(model, name) for name in model.model_fields}


def fields_marked(model: type[BaseModel], *effects: Effect) -> frozenset[str]:
    return frozenset(name for name, effect in marks(model).items() if effect in effects)


def identity(params: BaseModel) -> dict[str, Any]:
    """The ``Result`` fields of a section, each as the file set it, else its default: what a
    fingerprint holds. (A nested section stays as the file wrote it: ``think_split:
    {enabled: false}`` is not filled with the defaults of ``open`` and ``close``.)"""
    model = type(params)
    merged = {**model().model_dump(), **params.model_dump(mode="python", exclude_unset=True)}
    wanted = fields_marked(model, Effect.RESULT)
    return {k: v for k, v in merged.items() if k in wanted}


def section_model(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The section type a field holds (``X`` of ``X | None``), or None for a plain value."""
    kinds = [t for t in _members(model.model_fields[name].annotation)
             if get_origin(t) is None and isclass(t) and issubclass(t, BaseModel)]
    return kinds[0] if kinds else None


def _members(annotation: Any) -> Iterator[Any]:
    """The members of a union (``X | None``), else the annotation itself."""
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _members(get_args(annotation)[0])
    elif origin is Union or origin is UnionType:
        for arg in get_args(annotation):
            yield from _members(arg)
    else:
        yield annotation


def key_paths(model: type[BaseModel], prefix: str, *effects: Effect) -> tuple[str, ...]:
    """The dotted key paths under ``prefix`` whose mark is one of ``effects``, in field order,
    as dvc.yaml lists params: a section marked as a whole is one key, a ``ByKey`` one is
    walked into."""
    paths: list[str] = []
    for name, effect in marks(model).items():
        inner = section_model(model, name)
        if effect is Effect.BY_KEY and inner is not None:
            paths += key_paths(inner, f"{prefix}.{name}", *effects)
        elif effect in effects:
            paths.append(f"{prefix}.{name}")
    return tuple(paths)
