"""A hidden-style replay whose chance of a right answer falls with the competition year (the
year lens' tests, tests/unit/test_years.py, and the docs' figure of it, docs/screenshots.py)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.leaderboard_runs import unit


def right_by_year(name: str, pid: str, sample: int) -> bool:
    year = int(pid[:4])
    chance = 0.75 - 0.012 * (year - 1959)  # 75% in 1959 down to about 0% in 2023
    return unit("difficulty", pid) * 0.6 + 0.4 * unit(name, pid, sample) < chance


def replay(items: dict[str, pd.DataFrame], name: str, samples: int) -> list[dict[str, Any]]:
    """Replay rows over the validated item tables (track -> frame): about 3% of RIMO-N missing,
    a RIMO-P item right whole or wrong in its last part."""
    rows = []
    for j in range(samples):
        for r in items[TRACK_N].itertuples():
            if unit("missing", name, r.problem_id, j) < 0.03:
                continue  # missing: wrong, in the denominator
            ok = right_by_year(name, r.problem_id, j)
            rows.append({"track": TRACK_N, "problem_id": r.problem_id, "sample": j,
                         "prediction": r.answer if ok else r.answer + "1"})
        for r in items[TRACK_P][items[TRACK_P]["gradable"]].itertuples():
            sols = list(r.sub_solutions)
            pred = sols if right_by_year(name, r.problem_id, j) else [*sols[:-1], "wrong"]
            rows.append({"track": TRACK_P, "problem_id": r.problem_id, "sample": j,
                         "prediction": pred})
    return rows


__all__ = ["replay", "right_by_year"]
