"""leaderboard.html in headless Chromium: untrusted labels stay text, the figures render.

Run and model names are untrusted (a replay path, a served model's name): a label carrying
``<script>``, an event handler and mathtext must show verbatim, open no dialog and inject no
element; every figure must decode. The driver, the dialog spy and the DOM query are the
report's browser test's (tests/report/test_report_browser.py), whose control page proves they can
fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from stages.commands.leaderboard.board import build
from stages.commands.leaderboard.command import write
from stages.commands.leaderboard.figures import figures
from stages.commands.leaderboard.statistics import find_metric
from stages.commands.leaderboard.tables import render_html
from tests.leaderboard_runs import make_run
from tests.report.test_report_browser import INJECTED, driver, load, open_dialog
from tests.report_fixtures import XSS_TEXT

__all__ = ["driver"]  # the fixture, shared with the report's browser test

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
    assert len(sizes) == len(figs) == 4  # no costs here: no accuracy-vs-cost figure
    assert all(ok and w > 500 and h > 100 for ok, w, h in sizes), sizes
