"""A fixed answer for every item: the floor any model should beat."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rimo_eval.artifacts.items import Item
from rimo_eval.params.offline import ConstantParams
from rimo_eval.params.section import Section
from rimo_eval.predictors.base import Prediction, Predictor, own_section
from rimo_eval.rimo.tracks import TRACK_N


class ConstantPredictor(Predictor):
    name = "constant"

    def __init__(self, config: Section | None = None) -> None:
        super().__init__(config)
        params = own_section(ConstantParams, config, "predict.constant")
        self.answer, self.solution = params.answer, params.solution

    def predict(self, items: Sequence[Item]) -> Iterator[Prediction]:
        for item in items:
            value = (self.answer if item.track == TRACK_N
                     else [self.solution] * item.number_of_parts)
            for j in range(self.samples):  # k identical samples: a deterministic backend
                yield Prediction(item.track, item.problem_id, value, sample=j)
