"""The leaderboard's ranking against independent computations (scipy, by hand, compare); the
statistics it uses (draw, Holm, the paired p-value) are tested in tests/unit/test_statistics.py.

Runs are built from score frames in the schema the score stage writes, so these tests need no
DVC; tests/e2e/test_leaderboard.py runs the same code on real experiments.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rimo_eval.commands.compare.samples import mean_test
from rimo_eval.commands.leaderboard.board import build, judge_keys
from rimo_eval.commands.leaderboard.comparable import check
from rimo_eval.commands.leaderboard.loading import Run
from rimo_eval.commands.leaderboard.ranking import default_metric, find_metric, rank, ranks_of
from rimo_eval.commands.leaderboard.tables import render_html, render_markdown, render_tex
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.stats import holm
from tests.support.leaderboard_runs import make_run


@pytest.fixture(scope="module")
def runs() -> list[Run]:
    rng = np.random.default_rng(7)
    parts = rng.integers(1, 5, size=60)
    out = []
    for i, p in enumerate((0.3, 0.5, 0.52, 0.7)):
        out.append(make_run(f"r{i}", rng.random((80, 1)) < p, rng.random((60, 1)) < p, parts))
    return out


def test_mcnemar_against_leader_matches_scipy_binomtest(runs: list[Run]) -> None:
    ranked = rank(runs, find_metric(f"{TRACK_N}.accuracy", 1), 500, 0, 0.95)
    leader = runs[ranked["leader"]].scores[TRACK_N]["correct"].to_numpy()
    for i, test in ranked["tests"].items():
        other = runs[i].scores[TRACK_N]["correct"].to_numpy()
        b, c = int((leader & ~other).sum()), int((~leader & other).sum())
        assert (test["leader_only"], test["other_only"]) == (b, c)
        assert test["p_value"] == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue,
                                                rel=1e-12)


def test_tests_against_the_leader_are_holm_adjusted(runs: list[Run]) -> None:
    ranked = rank(runs, find_metric(f"{TRACK_N}.accuracy", 1), 500, 0, 0.95)
    others = ranked["order"][1:]
    raw = [ranked["tests"][i]["p_value"] for i in others]
    assert [ranked["tests"][i]["p_holm"] for i in others] == holm(raw)
    for i in others:
        t = ranked["tests"][i]
        assert t["below_leader"] == (t["p_holm"] < 0.05)


def test_ranks_and_rank_ranges() -> None:
    assert ranks_of(np.array([0.5, 0.7, 0.5, 0.1])).tolist() == [2, 1, 2, 4]
    parts = np.ones(100, dtype=int)
    base = (np.arange(100) / 100 + 0.005)[:, None]
    close = [make_run(f"c{i}", base < p, base < p, parts) for i, p in enumerate((0.5, 0.52))]
    far = make_run("far", base < 0.95, base < 0.95, parts)
    ranked = rank([*close, far], find_metric(f"{TRACK_N}.accuracy", 1), 1000, 0, 0.95)
    r = ranked["ranges"]
    assert r[2] == {"rank": 1, "low": 1, "high": 1}
    # Nested solved sets two items apart: c1 is never below c0 in a resample, and tied with
    # it when neither extra item is drawn (about 13% of resamples).
    assert r[1] == {"rank": 2, "low": 2, "high": 2}
    assert r[0] == {"rank": 3, "low": 2, "high": 3}
    assert (ranked["tests"][0]["leader_only"], ranked["tests"][0]["other_only"]) == (45, 0)


def test_k_samples_rank_by_mean_at_k_with_the_bootstrap_test() -> None:
    rng = np.random.default_rng(1)
    parts = rng.integers(1, 4, size=40)
    a = make_run("a", rng.random((50, 4)) < 0.4, rng.random((40, 4)) < 0.4, parts, k=4)
    b = make_run("b", rng.random((50, 4)) < 0.6, rng.random((40, 4)) < 0.6, parts, k=4)
    assert default_metric(4) == f"{TRACK_N}.mean_at_k.accuracy"
    ranked = rank([a, b], find_metric(default_metric(4), 4), 1000, 0, 0.95)
    test = ranked["tests"][0]
    assert test["test"] == "paired bootstrap on the per-item mean over samples"
    means = [r.scores[TRACK_N].groupby("problem_id")["correct"].mean().to_numpy() for r in (a, b)]
    paired = pd.DataFrame({"correct_a": means[1], "correct_b": means[0]})
    assert test["p_value"] == mean_test("correct", paired, {"a": 4, "b": 4}, 1000, 0,
                                        0.95)["p_value"]
    with pytest.raises(ConfigError, match="not a metric to rank by at k = 1"):
        find_metric(f"{TRACK_N}.mean_at_k.accuracy", 1)


def test_scores_that_do_not_reproduce_metrics_json_are_refused(runs: list[Run]) -> None:
    bad = make_run("bad", np.ones((80, 1), bool), np.ones((60, 1), bool),
                   runs[0].scores[TRACK_P]["number_of_parts"].to_numpy())
    bad.metrics[TRACK_N]["accuracy"] = 0.5
    with pytest.raises(DataError, match=r"bad: its scores give RIMO-N.accuracy = 1.0, its "
                                        "metrics.json says 0.5"):
        rank([runs[0], bad], find_metric(f"{TRACK_N}.accuracy", 1), 10, 0, 0.95)


def test_different_items_or_k_are_refused(runs: list[Run]) -> None:
    parts = runs[0].scores[TRACK_P]["number_of_parts"].to_numpy()
    short = make_run("short", np.ones((5, 1), bool), np.ones((60, 1), bool), parts)
    with pytest.raises(DataError, match="r0 and short are not comparable: different items"):
        check([runs[0], short])
    k2 = make_run("k2", np.ones((80, 2), bool), np.ones((60, 2), bool), parts, k=2)
    with pytest.raises(DataError, match="different k"):
        check([runs[0], k2])
    other = make_run("other", np.ones((80, 1), bool), np.ones((60, 1), bool), parts)
    runs[0].provenance = {"upstream": {"revision": "a", "sha256": {"RIMO-N.jsonl": "1"}}}
    other.provenance = {"upstream": {"revision": "a", "sha256": {"RIMO-N.jsonl": "2"}}}
    try:
        with pytest.raises(DataError, match=r"different upstream data \(sha256 of RIMO-N\.jsonl"):
            check([runs[0], other])
    finally:
        runs[0].provenance = {}


EVIL = '<script>alert(1)</script>|$\\frac{x}{$ & _%'


def test_renderings_escape_untrusted_labels(runs: list[Run]) -> None:
    src = runs[1].scores
    evil = make_run(EVIL, src[TRACK_N]["correct"].to_numpy()[:, None],
                    src[TRACK_P]["strict"].to_numpy()[:, None],
                    src[TRACK_P]["number_of_parts"].to_numpy())
    evil.judge = {"prefix_score": 0.25, "model": "judge<x>", "ci": {"prefix_score":
                                                                    {"low": 0.2, "high": 0.3}}}
    board = build([runs[0], evil], find_metric(f"{TRACK_N}.accuracy", 1),
                  {"samples": 50, "seed": 0, "confidence": 0.95})
    from rimo_eval.commands.leaderboard.figures import figures

    figs = figures(board, [runs[0], evil])  # mathtext would raise on the label's "$"
    page = render_html(board, figs)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    md = render_markdown(board)
    assert "<script>" not in md and "&lt;script>alert(1)&lt;/script>\\|" in md
    tex = render_tex(board)
    assert "\\textless{}script\\textgreater{}" in tex and "\\& \\_\\%" in tex
    assert "judge (non-primary)" in md and "25.0 [20.0, 30.0]" in md
    assert judge_keys(evil) == {"primary": False, "RIMO-P.judge.prefix_score": 0.25,
                                "RIMO-P.judge.prefix_score_ci_low": 0.2,
                                "RIMO-P.judge.prefix_score_ci_high": 0.3,
                                "RIMO-P.judge.model": "judge<x>"}
    evil.judge = {"prefix_score": 0.25, "prefix_score_ci_low": 0.2, "enabled": True,
                  "note": "text"}  # flat intervals, as a numbers-only judge.json may have
    assert judge_keys(evil) == {"primary": False, "RIMO-P.judge.prefix_score": 0.25,
                                "RIMO-P.judge.prefix_score_ci_low": 0.2}


def test_the_board_states_the_runs_floor_as_context(runs: list[Run]) -> None:
    """Comparable runs share their items, so their floor (breakdown.json's best constant) is
    the board's: a note in every rendering, never a column or the rank."""
    floor = {"answer": "1", "accuracy": 0.217910, "n": 335}
    floored = [dataclasses.replace(r, breakdown={TRACK_N: {"baselines": {"best_constant": floor}}})
               for r in runs]
    board = build(floored, find_metric(f"{TRACK_N}.accuracy", 1),
                  {"samples": 50, "seed": 0, "confidence": 0.95})
    assert board["floor"] == floor
    assert 'a constant "1" scores 21.8% on these RIMO-N items' in render_markdown(board)
    assert "a constant &#34;1&#34; scores 21.8% on these RIMO-N items" in render_html(board, {})
    assert all("floor" not in r for r in board["runs"])
