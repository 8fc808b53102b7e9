"""The key paths a params schema allows, and the nearest one to a key it does not.

An unknown key is most often a typo (``predict.limt``) or a key put in the wrong section
(``predict.temperature``, which belongs to a backend): the error names the key it probably
meant, so a user need not read the schema.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

CUTOFF = 0.6  # difflib's ratio: "limt" ~ "limit" is 0.89; unrelated words stay below


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    """The pydantic models an annotation admits (through Optional, unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    elif get_origin(annotation) in (Union, types.UnionType, Annotated):
        for arg in get_args(annotation):
            yield from _models(arg)


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """Key as written in the file (the alias where there is one) -> its annotation."""
    return {info.alias or name: info.annotation for name, info in model.model_fields.items()
            if not info.exclude}


def _model_at(root: type[BaseModel], parents: Iterable[str]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = root
    for key in parents:
        sub = next(_models(_fields(model).get(key)), None) if model else None
        if sub is None:
            return None
        model = sub
    return model


def all_paths(root: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key path of the schema, parents before children."""
    for key, annotation in _fields(root).items():
        yield (*prefix, key)
        for sub in _models(annotation):
            yield from all_paths(sub, (*prefix, key))


def nearest(root: type[BaseModel], path: list[str],
            extra: Mapping[type[BaseModel], Iterable[str]] | None = None) -> list[str]:
    """The schema's key paths nearest to the unknown ``path``: a close spelling among its
    siblings, else the same name elsewhere (those sharing the most leading keys with it, at
    most 3). ``extra`` adds keys a model admits beyond its fields (a plugin backend's section
    under predict)."""
    *parents, key = path
    model = _model_at(root, parents)
    if model is not None:
        siblings = [*_fields(model), *(extra or {}).get(model, ())]
        close = difflib.get_close_matches(key, siblings, n=1, cutoff=CUTOFF)
        if close:
            return [".".join([*parents, close[0]])]

    def shared(p: tuple[str, ...]) -> int:
        return next((i for i, (a, b) in enumerate(zip(p, parents, strict=False)) if a != b),
                    min(len(p), len(parents)))

    elsewhere = [p for p in all_paths(root) if p[-1] == key and list(p[:-1]) != parents]
    best = max(map(shared, elsewhere), default=0)
    return [".".join(p) for p in elsewhere if shared(p) == best][:3]
