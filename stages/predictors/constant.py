"""A fixed answer for every item: the floor any model should beat."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from stages.core.errors import StageError
from stages.core.items import Item
from stages.core.tracks import TRACK_N
from stages.predictors.base import Prediction, Predictor


class ConstantPredictor(Predictor):
    name = "constant"

    def __init__(self, config: dict | None = None) -> None:
        super().__init__(config)
        answer = self.config.get("answer", "0")
        solution = self.config.get("solution", "")
        if not isinstance(answer, str) or not isinstance(solution, str):
            raise StageError("params.yaml: predict.constant.answer and .solution must be strings")
        self.answer, self.solution = answer, solution

    def predict(self, items: Sequence[Item]) -> Iterator[Prediction]:
        for item in items:
            value = (self.answer if item.track == TRACK_N
                     else [self.solution] * item.number_of_parts)
            for j in range(self.samples):  # k identical samples: a deterministic backend
                yield Prediction(item.track, item.problem_id, value, sample=j)
