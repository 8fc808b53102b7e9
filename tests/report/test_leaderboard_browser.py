"""leaderboard.html in headless Chromium: untrusted labels stay text, the figures render.

Run and model names are untrusted (a replay path, a served model's name): a label carrying
``<script>``, an event handler and mathtext must show verbatim, open no dialog and inject no
element; every figure must decode. The driver, the dialog spy and the DOM query are the
report's browser test's (tests/support/report_browser.py), whose control page
(tests/report/test_report_browser.py) proves they can fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rimo_eval.commands.leaderboard.board import build
from rimo_eval.commands.leaderboard.command import write
from rimo_eval.commands.leaderboard.figures import figures
from rimo_eval.commands.leaderboard.ranking import find_metric
from rimo_eval.commands.leaderboard.tables import render_html
from tests.support.leaderboard_runs import make_run
from tests.support.report_browser import (  # noqa: F401 - the fixture
    INJECTED,
    chromium_driver,
    load,
    open_dialog,
)
from tests.support.report_fixtures import XSS_TEXT

LABEL = XSS_TEXT + " $\\frac{1}{2}$ <iframe src=javascript:alert(3)>"


def test_leaderboard_page_keeps_labels_inert(driver: Any, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    parts = rng.integers(1, 5, 60)
    runs = [make_run(name, rng.random((120, 1)) < p, rng.random((60, 1)) < p, parts)
            for name, p in (("plain", 0.3), (LABEL, 0.6))]
    board = build(runs, find_metric("RIMO-N.accuracy", 1),
                  {"samples": 200, "seed": 0, "confidence": 0.95})
    figs = figures(board, runs)
    write(tmp_path, {"leaderboard.html": render_html(board, figs)})
    load(driver, tmp_path / "leaderboard.html")
    assert open_dialog(driver) is None
    assert driver.execute_script("return window.__rimo_dialogs") == []
    assert driver.execute_script(INJECTED) == []
    cells = driver.execute_script(
        "return [...document.querySelectorAll('td')].map(td => td.textContent)")
    assert LABEL in cells
    sizes = driver.execute_script(
        "return [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
    # No costs here, so no accuracy-vs-cost figure; the year heatmap is one of the five.
    assert len(sizes) == len(figs) == 5
    assert all(ok and w > 500 and h > 100 for ok, w, h in sizes), sizes


# Five runs as a researcher has them: experiment names, long model names and replay paths,
# tokens and costs, every headline interval, the commit date (issue 29 §5: 1,613 px wide, it
# scrolled in a 1,400 px window), and the year lens of a real run's breakdown.json (issue 32's
# slope columns made it scroll again), two of them with a training cutoff (its unseen subset).
WIDE = (("const-full", "constant", {"answer": "0"}, 0.05),
        ("model-a", "local", {}, 0.3),
        ("model-b", "replay", {"path": "runs/model_b_with_a_rather_longer_name.jsonl"}, 0.5),
        ("claude-full", "anthropic", {"model": "claude-sonnet-4-5-20250929"}, 0.6),
        ("workspace", "openai", {"model": "Qwen/Qwen3-235B-A22B-Instruct-2507"}, 0.55))
CUTOFFS = {"claude-full": "2016-12", "workspace": "2019-06"}
FITS = """
const wide = document.querySelector('div.wide'), table = wide.querySelector('table');
const names = [...table.querySelectorAll('td.name')].map(td => td.getBoundingClientRect().width);
return {scroll: wide.scrollWidth, box: wide.clientWidth, page: document.documentElement.clientWidth,
        right: table.getBoundingClientRect().right, narrowest: Math.min(...names),
        cells: [...table.rows].slice(1).map(r => [...r.cells].map(c => c.innerText))};
"""


def wide_runs(k: int, seed: int) -> list[Any]:
    """WIDE's five runs at ``k`` samples, their items dated (the year lens), their params."""
    rng = np.random.default_rng(seed)
    parts = rng.integers(1, 5, 456)
    runs = []
    for name, backend, section, p in WIDE:
        run = make_run(name, rng.random((335, k)) < p, rng.random((456, k)) < p, parts, k=k,
                       years=True)
        run.params = {"predict": {"backend": backend, backend: section,
                                  **({"samples": k} if k > 1 else {})}}
        runs.append(run)
    return runs


def test_leaderboard_table_fits_a_1280_px_window(driver: Any, tmp_path: Path) -> None:
    runs = wide_runs(1, 0)
    for run in runs:
        if run.label in CUTOFFS:
            run.params["score"] = {"training_cutoff": CUTOFFS[run.label]}
        for track in ("RIMO-N", "RIMO-P"):
            block = run.metrics[track]
            block["usage"] = {"prompt_tokens": 4_567_890, "completion_tokens": 23_456_789,
                              "cost_usd": 412.37}
            for m in ("strict", "prefix_score", "sub_problem_accuracy"):
                if m in block:
                    block[f"{m}_ci_low"], block[f"{m}_ci_high"] = block[m] - 0.04, block[m] + 0.04
        run.date = "2026-12-04T10:00:00+00:00"
    board = build(runs, find_metric("RIMO-N.accuracy", 1),
                  {"samples": 200, "seed": 0, "confidence": 0.95})
    write(tmp_path, {"leaderboard.html": render_html(board, {})})
    assert driver.get_window_size()["width"] == 1280
    load(driver, tmp_path / "leaderboard.html")
    got = driver.execute_script(FITS)
    assert got["scroll"] <= got["box"] and got["right"] <= got["page"], got  # no scrolling
    assert got["narrowest"] >= 60, got  # long names wrap, but no name is squeezed to a sliver
    texts = [" ".join(row) for row in got["cells"]]
    for row, text in zip(board["runs"], texts, strict=True):
        assert row["label"] in text and row["model"] in text, text  # wrapped, never cut
        # Every value with its interval (on the line under it), the commit under its date.
        for key in ("RIMO-N.accuracy", "RIMO-P.strict", "RIMO-P.prefix_score"):
            assert f"{100 * row[key]:.1f}" in text, (key, text)
            assert f"[{100 * row[key + '_ci_low']:.1f}, {100 * row[key + '_ci_high']:.1f}]" \
                in text, (key, text)
        for track in ("RIMO-N", "RIMO-P"):  # each year slope with its interval
            trend = row["years"][track]["trend"]
            assert trend["slope"] is not None, trend  # a real run's finite estimate
            assert f"{trend['slope']:+.3f}" in text, (track, text)
            assert f"[{trend['slope_ci_low']:+.3f}, {trend['slope_ci_high']:+.3f}]" in text, \
                (track, text)
            unseen = row["years"][track]["unseen"]
            if row["label"] in CUTOFFS:  # the unseen rate with its interval, and the cutoff
                cell, name = unseen["unseen"], "strict" if track == "RIMO-P" else "accuracy"
                assert cell[name] is not None, cell
                assert f"{100 * cell[name]:.1f}" in text, (track, text)
                assert f"[{100 * cell[name + '_ci_low']:.1f}, " \
                       f"{100 * cell[name + '_ci_high']:.1f}]" in text, (track, text)
                assert CUTOFFS[row["label"]] in text, text
            else:
                assert unseen is None, unseen


PAGE_FITS = """
const wide = document.querySelector('div.wide'), doc = document.documentElement;
return {page_scroll: doc.scrollWidth, page: doc.clientWidth, box: wide.clientWidth,
        box_scroll: wide.scrollWidth, box_right: wide.getBoundingClientRect().right,
        overflow: getComputedStyle(wide).overflowX,
        heads: [...wide.querySelectorAll('th')].map(th => th.innerText),
        rows: [...wide.querySelector('table').rows].slice(1).map(r => r.innerText)};
"""


def test_leaderboard_at_k_4_scrolls_in_its_box_not_the_page(driver: Any, tmp_path: Path
                                                           ) -> None:
    """At k > 1 the table has its mean@k columns besides the first sample's: wider than a
    1,280 px window may be, it scrolls inside its own box (as designed), never the page, and
    no run or column is cut."""
    runs = wide_runs(4, 1)
    board = build(runs, find_metric("RIMO-N.accuracy", 4),
                  {"samples": 200, "seed": 0, "confidence": 0.95})
    write(tmp_path, {"leaderboard.html": render_html(board, {})})
    assert driver.get_window_size()["width"] == 1280
    load(driver, tmp_path / "leaderboard.html")
    got = driver.execute_script(PAGE_FITS)
    assert got["page_scroll"] <= got["page"], got  # the page itself never scrolls sideways
    assert got["box"] <= got["page"] and got["box_right"] <= got["page"], got
    if got["box_scroll"] > got["box"]:  # wider than the window: its own box scrolls
        assert got["overflow"] in ("auto", "scroll"), got
    assert any("@" in h for h in got["heads"]), got["heads"]  # the k-sample columns are there
    assert len(got["rows"]) == len(board["runs"]) == len(WIDE), got
    for row, text in zip(board["runs"], got["rows"], strict=True):
        assert row["label"] in text and row["model"] in text, text  # wrapped, never cut


REACH = """
const wide = document.querySelector('div.wide'), box = wide.getBoundingClientRect();
const edge = th => { const r = th.getBoundingClientRect();
                     return [th.innerText, r.left, r.right]; };
const heads = [...wide.querySelectorAll('th')];
const test = edge(heads.find(th => th.innerText.startsWith('vs leader')));
wide.scrollLeft = wide.scrollWidth;
return {box: [box.left, box.right], test, last: edge(heads[heads.length - 1]),
        page_scroll: document.documentElement.scrollWidth,
        page: document.documentElement.clientWidth,
        notes: [...document.querySelectorAll('li')].map(li => li.innerText)};
"""


@pytest.mark.parametrize("k", [1, 2, 16])
def test_leaderboard_test_column_in_view_and_last_column_reachable(driver: Any, tmp_path: Path,
                                                                   k: int) -> None:
    """At 1,400 px (issue 43): "vs leader" is in view without scrolling (it was the cut-off
    20th of 25 columns at k = 2), the last column is whole once the table's box is scrolled,
    and the page says why there is no unseen subset (no run has a training cutoff)."""
    runs = wide_runs(k, 2)
    board = build(runs, find_metric("RIMO-N.accuracy", k),
                  {"samples": 100, "seed": 0, "confidence": 0.95})
    write(tmp_path, {"leaderboard.html": render_html(board, {})})
    driver.set_window_size(1400, 1000)
    try:
        load(driver, tmp_path / "leaderboard.html")
        got = driver.execute_script(REACH)
    finally:
        driver.set_window_size(1280, 1000)
    left, right = got["box"]
    assert left <= got["test"][1] and got["test"][2] <= right + 0.5, got
    assert left <= got["last"][1] and got["last"][2] <= right + 0.5, got  # whole, after scroll
    assert got["page_scroll"] <= got["page"], got
    assert any("no run has a training cutoff" in n and "--cutoff" in n for n in got["notes"]), \
        got["notes"]
