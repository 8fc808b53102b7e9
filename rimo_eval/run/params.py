"""One typed section of a revision's params.yaml, which the run record keeps as plain data.

``Run.params`` is the file as it stands, on purpose: validating the whole of another revision's
file would refuse an older one (a key since renamed, a backend not installed here). A tool that
needs one section typed takes it here, validated by the model the stages use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from rimo_eval.errors import ConfigError
from rimo_eval.params.config import ScoreParams, parse_section
from rimo_eval.params.section import Section

S = TypeVar("S", bound=Section)


def typed_section(params: Mapping[str, Any], model: type[S], key: str,
                  where: str = "params.yaml") -> S | None:
    """``key`` of ``params`` (dotted: ``score.bootstrap``) as ``model``; None where the file
    does not set it. A value the model refuses is a ConfigError that names the key."""
    node: Any = params
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
        if node is None:
            return None
    if not isinstance(node, Mapping):
        raise ConfigError(f"{where}: {key} must be a mapping, got {type(node).__name__}")
    return parse_section(model, node, key)


def section_or_none(params: Mapping[str, Any], model: type[S], key: str) -> S | None:
    """:func:`typed_section`, leniently: None also where the model refuses the value (an
    older file), as the run record reads everything else of a run."""
    try:
        return typed_section(params, model, key)
    except ConfigError:
        return None


def own_cutoff(params: Mapping[str, Any]) -> str | None:
    """The run's own ``score.training_cutoff``; None where unset or its score section is
    refused (what the leaderboard's and the view's year lens fall back from)."""
    score = section_or_none(params, ScoreParams, "score")
    return None if score is None else score.training_cutoff


__all__ = ["own_cutoff", "section_or_none", "typed_section"]
