"""RIMO-N's floor and answer types over the items evaluated (sample 0, as the headline):
``baselines.best_constant`` (rimo_eval.stats.floors) and ``by_answer_type``, each type's
accuracy with its Wilson interval as a year band has. Context for breakdown.json, not a metric.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.score.years import cell
from rimo_eval.stats.floors import ANSWER_TYPES, answer_type, best_constant


def floor_blocks(first: pd.DataFrame, confidence: float) -> dict[str, Any]:
    """``first``: RIMO-N's score rows of sample 0 (gold, correct), one per item evaluated."""
    golds = [str(g) for g in first["gold"]]
    types = np.array([answer_type(g) for g in golds], dtype=object)
    right = first["correct"].to_numpy(dtype=bool)
    return {"baselines": {"best_constant": best_constant(golds)},
            "by_answer_type": {t: cell(int(right[types == t].sum()), int((types == t).sum()),
                                       "accuracy", confidence) for t in ANSWER_TYPES}}


__all__ = ["floor_blocks"]
