"""The predictor interface: items in, one prediction per item out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from rimo_eval.artifacts.items import Item

# Re-exported: backends build these.
from rimo_eval.artifacts.predictions import STATUS_ERROR as STATUS_ERROR
from rimo_eval.artifacts.predictions import STATUS_MISSING as STATUS_MISSING
from rimo_eval.artifacts.predictions import STATUS_OK as STATUS_OK
from rimo_eval.artifacts.predictions import STATUSES as STATUSES
from rimo_eval.artifacts.predictions import Prediction as Prediction
from rimo_eval.params.config import parse_section
from rimo_eval.params.section import Section

if TYPE_CHECKING:
    from rimo_eval.artifacts.text_spool import TextSpool

S = TypeVar("S", bound=Section)


class Predictor(ABC):
    """A backend. ``config`` is its own section of ``params.yaml`` (``predict.<name>``): a
    built-in's typed section, a plugin's ``PluginSection`` (the keys as the file gives them,
    which the plugin checks), None when the file has none.

    Third-party packages register subclasses under the ``rimo_eval.predictors`` entry-point group.
    """

    name: ClassVar[str]
    # Every (track, problem_id) of the benchmark, set by the stage before ``predict`` so that a
    # backend reading ids from elsewhere can tell an unknown id from one outside the sample.
    known_keys: frozenset[tuple[str, str]] | None = None
    # k = predict.samples, set by the stage: yield samples 0..k-1 per item (Prediction.sample).
    samples: int = 1
    # Set by the stage: a backend that returns its predictions only at the end (the chat
    # engine) parks each finished one's long texts there, so a k = 64 run holds light records.
    spool: TextSpool | None = None

    def __init__(self, config: Section | None = None) -> None:
        # A plain dict is a programming error (a caller past the type checker): never parsed.
        if not isinstance(cast(object, config), Section | None):
            raise TypeError(f"{type(self).__name__} takes a params Section or None, not "
                            f"{type(config).__name__}")
        # The keys the file set, as plain data: what identity() hashes into the fingerprint.
        self.config: dict[str, Any] = {} if config is None else config.as_dict()

    def identity(self) -> dict[str, Any]:
        """Everything that determines the outputs; hashed into the fingerprint. No secrets here."""
        return {"backend": self.name, "params": self.config}

    @abstractmethod
    def predict(self, items: Sequence[Item]) -> Iterable[Prediction]:
        """Yield one prediction per (item, sample), in any order (the stage checks the rule)."""


def own_section(model: type[S], config: Section | None, where: str) -> S:
    """A built-in backend's typed section: the one given, or (None) its defaults as an empty
    ``where`` gives them, so a required key is the file's ConfigError. Another section is a
    programming error, never parsed into this one."""
    if config is None:
        return parse_section(model, {}, where)
    if not isinstance(config, model):
        raise TypeError(f"{where} takes a {model.__name__}, not {type(config).__name__}")
    return config
