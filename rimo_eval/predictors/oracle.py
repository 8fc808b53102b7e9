"""The oracle returns the gold: a pipeline check that must score 1.0."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rimo_eval.artifacts.items import Item
from rimo_eval.params.offline import OracleParams
from rimo_eval.params.section import Section
from rimo_eval.predictors.base import Prediction, Predictor, own_section
from rimo_eval.rimo.tracks import TRACK_N


class OraclePredictor(Predictor):
    name = "oracle"

    def __init__(self, config: Section | None = None) -> None:
        super().__init__(config)
        own_section(OracleParams, config, "predict.oracle")  # no keys, but no other section

    def predict(self, items: Sequence[Item]) -> Iterator[Prediction]:
        for item in items:
            gold = item.answer if item.track == TRACK_N else list(item.sub_solutions)
            for j in range(self.samples):  # k identical samples: a deterministic backend
                yield Prediction(item.track, item.problem_id, gold, sample=j)
