"""The runs x items matrix of the item audit, from each run's score tables (sample 0, as the
headline metrics), with the refusals of runs that cannot share one matrix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from rimo_eval.commands.items.audit import MIN_RUNS, ItemsError, Matrix
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS


def _gradable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["gradable"].astype(bool)] if "gradable" in frame.columns else frame


def build_matrix(labels: Sequence[str], scores: Sequence[Mapping[str, pd.DataFrame]],
                 samples: Sequence[int]) -> Matrix:
    """``scores[r][track]``: run r's score table of that track (columns problem_id, sample,
    correct, prediction and gold on RIMO-N; strict on RIMO-P); ``samples[r]``: its k."""
    if len(labels) < MIN_RUNS:
        raise ItemsError(f"the item audit needs at least {MIN_RUNS} runs over the same items, "
                         f"got {len(labels)}: name more runs, or --all")
    if len(set(samples)) > 1:
        mix = ", ".join(f"{label} (k = {k})" for label, k in zip(labels, samples, strict=True))
        raise ItemsError(f"the runs mix sample counts: {mix}; the audit reads sample 0 of runs "
                         f"of one k: name runs of one k")
    # Sample 0 of each item, as the headline metrics; RIMO-P's ungradable items (no reference
    # sub-solution) are no item a run could solve.
    firsts = [{t: _gradable(s[t][s[t]["sample"] == 0]).sort_values("problem_id", kind="stable")
               for t in TRACKS} for s in scores]
    ref = firsts[0]
    for label, first in zip(labels[1:], firsts[1:], strict=True):
        for t in TRACKS:
            if list(first[t]["problem_id"]) != list(ref[t]["problem_id"]):
                raise ItemsError(f"{label} and {labels[0]} evaluated different {t} items "
                                 f"({len(first[t])} and {len(ref[t])}); the audit needs the "
                                 f"same items in every run")
    n_ids = list(ref[TRACK_N]["problem_id"])
    p_ids = list(ref[TRACK_P]["problem_id"])
    correct = np.array([
        np.concatenate([f[TRACK_N]["correct"].to_numpy(bool), f[TRACK_P]["strict"].to_numpy(bool)])
        for f in firsts])
    answers = np.array([[*(None if pd.isna(x) else str(x) for x in f[TRACK_N]["prediction"]),
                         *[None] * len(p_ids)] for f in firsts], dtype=object)
    return Matrix(runs=list(labels), tracks=[TRACK_N] * len(n_ids) + [TRACK_P] * len(p_ids),
                  problem_ids=n_ids + p_ids,
                  gold=[*(str(g) for g in ref[TRACK_N]["gold"]), *[None] * len(p_ids)],
                  correct=correct, answers=answers)


__all__ = ["build_matrix"]
