"""``leaderboard --all``: which comparable runs it ranks, and what it says of the others.

Runs built from score frames in the score stage's schema (tests/support/leaderboard_runs.make_run);
tests/e2e/test_leaderboard.py runs --all on real experiments.
"""

from __future__ import annotations

import numpy as np
import pytest

from rimo_eval.commands.leaderboard.comparable import check, largest_group
from rimo_eval.commands.leaderboard.loading import Run
from rimo_eval.errors import DataError
from rimo_eval.run.revision import WORKSPACE, Revision
from tests.support.leaderboard_runs import make_run

RNG = np.random.default_rng(3)


def full(name: str, items: int = 30, k: int = 1) -> Run:
    return make_run(name, RNG.random((items, k)) < 0.5, RNG.random((20, k)) < 0.5,
                    np.full(20, 2), k)


def workspace(run: Run) -> Run:
    run.revision = Revision(WORKSPACE, WORKSPACE, None)
    run.label = WORKSPACE
    return run


def test_the_largest_group_is_ranked_and_each_other_run_is_listed_with_its_reason() -> None:
    ws = workspace(full("ws", items=10))  # a 10-item sample in the workspace
    runs = [ws, full("a"), full("b"), full("c"), full("k2", k=2), full("s2", items=10)]
    ranked, left, why = largest_group(runs)
    assert why == ("--all ranks 3 runs, k = 1, 30/20 RIMO-N/RIMO-P items (all items): the "
                   "largest of 3 groups of comparable runs (the next has 2)")
    assert [r.label for r in ranked] == ["a", "b", "c"]
    reasons = {x.label: x.reason for x in left}
    assert list(reasons) == ["workspace", "k2", "s2"]
    assert reasons["k2"].startswith("not comparable with a: different k (samples per item)")
    assert reasons["workspace"].startswith(
        "not comparable with a: different items: a evaluates 30/20 RIMO-N/RIMO-P items")
    assert left[0].revision == {"label": WORKSPACE, "kind": WORKSPACE, "rev": None,
                                "ref": None}


def test_a_tie_goes_to_the_workspace_group_and_it_is_the_reference() -> None:
    runs = [full("a"), full("b"), full("s1", items=10), workspace(full("ws", items=10))]
    ranked, left, why = largest_group(runs)
    assert why.endswith(": tied for the largest of 2 groups: the workspace's group")
    assert [r.label for r in ranked] == ["s1", "workspace"]
    assert [x.label for x in left] == ["a", "b"]
    assert left[0].reason.startswith("not comparable with workspace: different items")


def test_named_runs_still_refuse_a_mix() -> None:
    with pytest.raises(DataError, match="a and s are not comparable: different items"):
        check([full("a"), full("b"), full("s", items=10)])
