"""The predictor interface: items in, one prediction per item out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from stages.items import Item

STATUS_OK = "ok"
STATUS_MISSING = "missing"  # the backend has no prediction for the item (counted wrong)
STATUS_ERROR = "error"  # the backend failed on the item (counted wrong, reason kept)
STATUSES = (STATUS_OK, STATUS_MISSING, STATUS_ERROR)


@dataclass
class Prediction:
    """A prediction: a string for RIMO-N, an ordered list of strings for RIMO-P."""

    track: str
    problem_id: str
    prediction: str | list[str] | None
    status: str = STATUS_OK
    error: str | None = None
    # Backend-specific record of how the prediction came about (raw text, usage, latency...).
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.track, self.problem_id)


class Predictor(ABC):
    """A backend. ``config`` is its own section of ``params.yaml`` (``predict.<name>``).

    Third-party packages register subclasses under the ``rimo_eval.predictors`` entry-point group.
    """

    name: ClassVar[str]
    # Every (track, problem_id) of the benchmark, set by the stage before ``predict`` so that a
    # backend reading ids from elsewhere can tell an unknown id from one outside the sample.
    known_keys: frozenset[tuple[str, str]] | None = None

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config: dict[str, Any] = dict(config or {})

    def identity(self) -> dict[str, Any]:
        """Everything that determines the outputs; hashed into the fingerprint. No secrets here."""
        return {"backend": self.name, "params": self.config}

    @abstractmethod
    def predict(self, items: Sequence[Item]) -> Iterable[Prediction]:
        """Yield one prediction per item, in any order (the stage checks the one-per-item rule)."""
