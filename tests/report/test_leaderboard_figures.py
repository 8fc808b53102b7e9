"""The leaderboard's figures: one-column width, byte-identical PNG and SVG, cost where known."""

from __future__ import annotations

import io
import itertools
from typing import Any

import matplotlib
import numpy as np
import pytest
from matplotlib import colors as mcolors
from matplotlib import image as mpimg
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from rimo_eval.artifacts.items import DOMAINS
from rimo_eval.commands.leaderboard.board import build
from rimo_eval.commands.leaderboard.figures import (
    BELOW,
    LEADER,
    OTHER,
    RC,
    WIDTH,
    domain_heatmap,
    encode,
    figures,
    forest,
    label,
    solved_grid,
)
from rimo_eval.commands.leaderboard.loading import Run
from rimo_eval.commands.leaderboard.ranking import find_metric
from rimo_eval.commands.leaderboard.years import year_heatmap
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.leaderboard_runs import make_run


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
                             "forest_rimo_p", "solved_grid", "year_heatmap"]
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


# --- issue 29 §5: the RIMO-P forest marks, the heatmap's colour bar -------------------------


def forest_marks(fig: Any) -> list[dict[str, str]]:
    """Per panel, each run's label -> the colour of its point."""
    axes = [ax for ax in fig.axes if ax.containers]
    labels = {round(y): t.get_text() for y, t in zip(axes[0].get_yticks(),
                                                     axes[0].get_yticklabels(), strict=True)}
    return [{labels[round(c.lines[0].get_ydata()[0])]: mcolors.to_hex(c.lines[0].get_color())
             for c in ax.containers} for ax in axes]


@pytest.fixture(scope="module")
def p_spread() -> list[Run]:
    """RIMO-N close together (nobody significantly below its leader), RIMO-P far apart: a
    strong leader, a middle run and a weak one."""
    rng = np.random.default_rng(1)
    parts = rng.integers(1, 5, 200)
    n = rng.random((150, 1)) < 0.5
    strong = rng.random((200, 1)) < 0.8
    mid = strong.copy()
    mid[np.flatnonzero(strong)[:3]] = False  # 3 items fewer: McNemar p = 0.25, not below
    weak = rng.random((200, 1)) < 0.3

    def flip(first: int) -> np.ndarray:  # RIMO-N: one item apart, nobody below
        out = n.copy()
        out[first] = ~out[first]
        return out

    return [make_run("p-strong", n, strong, parts), make_run("p-mid", flip(0), mid, parts),
            make_run("p-weak", flip(1), weak, parts)]


def test_rimo_p_forest_marks_the_runs_below_each_panels_leader(p_spread: list[Run]) -> None:
    """The RIMO-P panels test their own metric against its leader (the RIMO-N panel's test is
    of the ranked metric): blue the leader, red a run significantly below it, grey the rest.
    Before, RIMO-P's panels were all grey whatever the gaps."""
    board = board_of(p_spread)
    assert not any(r["vs_leader"] and r["vs_leader"]["below_leader"] for r in board["runs"])
    png = figures(board, p_spread)["forest_rimo_p"]["png"]
    pixels = (mpimg.imread(io.BytesIO(png))[..., :3] * 255).round().astype(int)
    red = np.array(mcolors.to_rgb(BELOW)) * 255
    assert (np.abs(pixels - red).max(axis=-1) < 8).sum() > 20  # the weak run's points, drawn
    with matplotlib.rc_context(RC):
        panels = forest_marks(forest(board, TRACK_P, p_spread))
        ranked = forest_marks(forest(board, TRACK_N, p_spread))
    assert len(panels) == 3
    for marks in panels:  # strict, sub-problem accuracy, prefix score
        assert marks == {"p-strong": LEADER, "p-mid": OTHER, "p-weak": BELOW}, marks
    # RIMO-N: the table's own test; no run is significantly below its leader there.
    assert sorted(ranked[0].values()) == [LEADER, OTHER, OTHER]


def test_domain_heatmap_colour_bar_is_in_percent_like_its_cells(costed: list[Run]) -> None:
    for run, values in zip(costed, ((0.25, 0.5, 0.125, 1.0), (0.0, 0.75, 0.5, 0.6),
                                    (1.0, 0.9, 0.8, 0.7)), strict=True):
        run.breakdown = {"RIMO-N": {"by_domain": dict(zip(DOMAINS, values, strict=True)),
                                    "by_domain_n": dict.fromkeys(DOMAINS, 8)}}
    board = board_of(costed)
    with matplotlib.rc_context(RC):
        fig = domain_heatmap(board, {r.label: r for r in costed})
    ax, bar = fig.axes
    assert bar.get_ylim() == (0.0, 100.0)
    assert [t.get_text() for t in bar.get_yticklabels()] == ["0", "25", "50", "75", "100"]
    # Every cell's colour is the colour bar's at the percent the cell is labelled with.
    image = ax.images[0]
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): float(t.get_text())
             for t in ax.texts}
    data = np.asarray(image.get_array())
    for (i, j), shown in cells.items():
        assert data[i, j] == pytest.approx(shown, abs=0.05)
        assert image.to_rgba(data[i, j]) == image.cmap(image.norm(shown), alpha=None) or \
            np.allclose(image.to_rgba(data[i, j]), image.cmap(image.norm(shown)), atol=0.01)
    assert len(cells) == 12


# --- the year heatmap's panel titles -------------------------------------------------------


def text_boxes(fig: Figure) -> dict[str, Bbox]:
    """Each non-empty title (axes titles, the figure's suptitle) -> its box in the drawn figure
    (constrained layout placed, at the PNG's 300 dpi)."""
    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(300)
    fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    titles = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
    if fig._suptitle is not None:
        titles.append(fig._suptitle)
    return {t.get_text(): t.get_window_extent(renderer) for t in titles if t.get_text()}


def test_year_heatmap_titles_do_not_overlap() -> None:
    """Both panels' titles (and any figure title) are whole in the one-column figure and none
    covers another; before, "RIMO-N accuracy by competition year (%)" ran into RIMO-P's."""
    rng = np.random.default_rng(0)
    parts = rng.integers(1, 5, 120)
    runs = [make_run(f"model-{i}", rng.random((150, 1)) < p, rng.random((120, 1)) < p, parts,
                     years=True) for i, p in enumerate((0.3, 0.6))]
    board = board_of(runs)
    with matplotlib.rc_context(RC):
        fig = year_heatmap(board, {r.label: r for r in runs}, WIDTH)
        boxes = text_boxes(fig)
    assert len(boxes) >= 2, boxes  # a title per panel at least
    assert any(TRACK_N in t for t in boxes) and any(TRACK_P in t for t in boxes), boxes
    page = fig.bbox
    for text, box in boxes.items():
        assert page.x0 <= box.x0 and box.x1 <= page.x1, (text, box, page)  # not cut
    for (a, box_a), (b, box_b) in itertools.combinations(boxes.items(), 2):
        assert not box_a.overlaps(box_b), (a, box_a, b, box_b)


def test_year_heatmap_draws_a_mathtext_run_label_as_text() -> None:
    """A run label is untrusted: "$\\nosuch$" in the year heatmap's row labels once made
    mathtext raise and the whole leaderboard fail (its labels were cut, not escaped)."""
    rng = np.random.default_rng(0)
    parts = rng.integers(1, 5, 60)
    evil = r"$\nosuch{x}$ and $\frac{1}{$"
    runs = [make_run(name, rng.random((80, 1)) < p, rng.random((60, 1)) < p, parts, years=True)
            for name, p in (("plain", 0.3), (evil, 0.6))]
    board = board_of(runs)
    with matplotlib.rc_context(RC):
        fig = year_heatmap(board, {r.label: r for r in runs}, WIDTH)
        png = encode(fig)["png"]  # draws every label
    assert mpimg.imread(io.BytesIO(png)).shape[1] == round(WIDTH * 300)
    assert label(evil) in [t.get_text() for t in fig.axes[0].get_yticklabels()]


# --- issue 43's screens: the RIMO-P forest's titles, the solved grid's key, the unseen column


def k_runs(k: int, years: bool = False) -> list[Run]:
    rng = np.random.default_rng(k)
    parts = rng.integers(1, 5, 60)
    return [make_run(f"model-{i}", rng.random((80, k)) < p, rng.random((60, k)) < p, parts,
                     k=k, years=years) for i, p in enumerate((0.3, 0.6))]


@pytest.mark.parametrize("k", [1, 2, 16])
def test_rimo_p_forest_panel_titles_do_not_overlap(k: int) -> None:
    """Ranked by sub-problem accuracy (the longest title, with "mean@k" and "(ranked)"), the
    three panels' titles and the track's title are whole and apart; at k = 2 "sub-problem acc.
    mean@k" ran into both neighbours."""
    runs = k_runs(k)
    ranked = "RIMO-P.sub_problem_accuracy" if k == 1 else "RIMO-P.mean_at_k.sub_problem_accuracy"
    board = build(runs, find_metric(ranked, k), {"samples": 100, "seed": 0, "confidence": 0.95})
    with matplotlib.rc_context(RC):
        fig = forest(board, TRACK_P, runs)
        boxes = text_boxes(fig)
    assert len(boxes) == 4, boxes  # three panels and the track
    assert any("(ranked)" in t for t in boxes) and (k == 1) != any("mean@k" in t for t in boxes)
    page = fig.bbox
    for text, box in boxes.items():
        assert page.x0 <= box.x0 and box.x1 <= page.x1, (text, box, page)
    for (a, box_a), (b, box_b) in itertools.combinations(boxes.items(), 2):
        assert not box_a.overlaps(box_b), (a, box_a, b, box_b)


@pytest.mark.parametrize(("k", "ticks"), [(1, ["wrong", "right"]), (2, ["0", "1/2", "all"])])
def test_solved_grid_has_a_colour_key(k: int, ticks: list[str]) -> None:
    """The grid says which colour is right: a colour bar, its ends named (before: black and
    white, and no key)."""
    runs = k_runs(k)
    with matplotlib.rc_context(RC):
        fig = solved_grid(board_of(runs) if k == 1 else
                          build(runs, find_metric("RIMO-N.accuracy", k),
                                {"samples": 100, "seed": 0, "confidence": 0.95}),
                          {r.label: r for r in runs})
        fig.draw_without_rendering()
    assert len(fig.axes) == 2, fig.axes  # the grid and its colour bar
    bar = fig.axes[1]
    assert [t.get_text() for t in bar.get_yticklabels()] == ticks
    image = fig.axes[0].images[0]
    assert image.get_cmap().name != "Greys"  # one scale with the other heatmaps


def test_year_heatmap_says_why_the_unseen_column_is_empty() -> None:
    """With no training cutoff, every unseen cell says "no cutoff" instead of a blank."""
    runs = k_runs(1, years=True)
    with matplotlib.rc_context(RC):
        fig = year_heatmap(board_of(runs), {r.label: r for r in runs}, WIDTH)
    for ax in fig.axes[:2]:
        assert [t.get_text() for t in ax.texts].count("no\ncutoff") == len(runs)
        assert "cutoff" in ax.get_xticklabels()[-1].get_text()
