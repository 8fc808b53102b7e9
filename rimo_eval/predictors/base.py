"""The predictor interface: items in, one prediction per item out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rimo_eval.artifacts.items import Item

# Re-exported: backends build these.
from rimo_eval.artifacts.predictions import STATUS_ERROR as STATUS_ERROR
from rimo_eval.artifacts.predictions import STATUS_MISSING as STATUS_MISSING
from rimo_eval.artifacts.predictions import STATUS_OK as STATUS_OK
from rimo_eval.artifacts.predictions import STATUSES as STATUSES
from rimo_eval.artifacts.predictions import Prediction as Prediction
from rimo_eval.params.section import Section

if TYPE_CHECKING:
    from rimo_eval.artifacts.text_spool import TextSpool


class Predictor(ABC):
    """A backend. ``config`` is its own section of ``params.yaml`` (``predict.<name>``).

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

    def __init__(self, config: Section | Mapping[str, Any] | None = None) -> None:
        # The keys the file set, as plain data (a built-in backend gets its typed section).
        self.config: dict[str, Any] = (config.as_dict() if isinstance(config, Section)
                                       else dict(config or {}))

    def identity(self) -> dict[str, Any]:
        """Everything that determines the outputs; hashed into the fingerprint. No secrets here."""
        return {"backend": self.name, "params": self.config}

    @abstractmethod
    def predict(self, items: Sequence[Item]) -> Iterable[Prediction]:
        """Yield one prediction per (item, sample), in any order (the stage checks the rule)."""
