"""The oracle returns the gold: a pipeline check that must score 1.0."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rimo_eval.artifacts.items import Item
from rimo_eval.predictors.base import Prediction, Predictor
from rimo_eval.rimo.tracks import TRACK_N


class OraclePredictor(Predictor):
    name = "oracle"

    def predict(self, items: Sequence[Item]) -> Iterator[Prediction]:
        for item in items:
            gold = item.answer if item.track == TRACK_N else list(item.sub_solutions)
            for j in range(self.samples):  # k identical samples: a deterministic backend
                yield Prediction(item.track, item.problem_id, gold, sample=j)
