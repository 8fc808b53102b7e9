"""The leaderboard's figures: one-column width, byte-identical PNG and SVG, cost where known."""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib import image as mpimg

from stages.commands.leaderboard.board import build
from stages.commands.leaderboard.figures import WIDTH, figures
from stages.commands.leaderboard.loading import Run
from stages.commands.leaderboard.statistics import find_metric
from tests.leaderboard_runs import make_run


@pytest.fixture(scope="module")
def costed() -> list[Run]:
    rng = np.random.default_rng(0)
    parts = rng.integers(1, 5, 60)
    runs = []
    for i, (p, cost) in enumerate(((0.3, 0.8), (0.5, 4.1), (0.7, 55.0))):
        run = make_run(f"model-{i}", rng.random((120, 1)) < p, rng.random((60, 1)) < p, parts)
        run.metrics["RIMO-N"]["usage"] = {"prompt_tokens": 1000, "cost_usd": cost * 0.6}
        run.metrics["RIMO-P"]["usage"] = {"prompt_tokens": 1000, "cost_usd": cost * 0.4}
        runs.append(run)
    return runs


def board_of(runs: list[Run]) -> dict:
    return build(runs, find_metric("RIMO-N.accuracy", 1),
                 {"samples": 200, "seed": 0, "confidence": 0.95})


def test_figures_are_one_column_wide_and_byte_identical(costed: list[Run]) -> None:
    first, second = figures(board_of(costed), costed), figures(board_of(costed), costed)
    assert sorted(first) == ["accuracy_cost", "domain_heatmap", "forest_rimo_n",
                             "forest_rimo_p", "solved_grid"]
    for name, formats in first.items():
        assert formats == second[name], name
        png = mpimg.imread(io.BytesIO(formats["png"]))
        assert png.shape[1] == round(WIDTH * 300), name  # 3.4 in at 300 dpi
        assert png[..., :3].std() > 0.05, name  # not blank
        svg = formats["svg"].decode()
        assert svg.startswith("<?xml") and "<dc:date>" not in svg


def test_accuracy_against_cost_only_where_costs_are_known(costed: list[Run]) -> None:
    plain = [make_run(r.label, r.scores["RIMO-N"]["correct"].to_numpy()[:, None],
                      r.scores["RIMO-P"]["strict"].to_numpy()[:, None],
                      r.scores["RIMO-P"]["number_of_parts"].to_numpy()) for r in costed]
    assert "accuracy_cost" not in figures(board_of(plain), plain)
