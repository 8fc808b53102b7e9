"""Regenerates every image the docs show (docs/*.png) from synthetic but real runs.

    .venv/bin/python docs/screenshots.py                     # all of them, into docs/
    .venv/bin/python docs/screenshots.py --out /tmp/shots --only view_grid.png
    .venv/bin/python docs/screenshots.py --list              # name, width, what it shows

The runs: replay experiments over all 791 items in a temporary git + DVC repo (the upstream
mirror fetched and validated), each made by the real ``dvc exp run -S
predict.replay.path=runs/NAME.jsonl``: the synthetic models of rising strength of
tests/support/leaderboard_runs.py and the year-falling replay of tests/support/year_runs.py,
not real models. The item page at k = 16 is a run of benchmarks/view_build.py's synthetic
replies (Markdown and math, with reasoning) made by the real replay predict and score stages and
built by the view's own site builder. The tools are the real ones (``rimo-eval leaderboard``,
``rimo-eval view``, ``dvc plots diff``, the report stage); pages are shot in the tests'
hermetic headless Chromium (tests/support/browser.py) with a 1,400 px wide viewport and
cropped to the part the docs show; a figure a tool writes itself is copied byte for byte.

Deterministic (seeded runs, fixed crops: the four images that name no commit came out
byte-identical from two runs of the script on different trees) but for what names a commit:
the base commit holds the project's tree, so its hash and the experiments' change with any
edit, and DVC dates an experiment's commit when it runs (the leaderboard's last column, the
view's run headers).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import pandas as pd  # noqa: E402

from rimo_eval.artifacts.paths import items_path  # noqa: E402
from rimo_eval.io.atomic import write_bytes  # noqa: E402
from rimo_eval.rimo.tracks import TRACKS  # noqa: E402
from tests.support.browser import chromium  # noqa: E402
from tests.support.leaderboard_runs import MODELS, replay_rows  # noqa: E402
from tests.support.paths import find_mirror  # noqa: E402
from tests.support.pipeline_repo import BIN, make_repo, sh  # noqa: E402
from tests.support.replay_files import repo_gold, write_jsonl  # noqa: E402
from tests.support.year_runs import replay  # noqa: E402

WIDTH = 1400  # the viewport of every page shot (issue 43: each screen checked at 1,400 px)
HEIGHT = 2400  # tall enough that every crop is on screen (the view renders math on screen)
DATED, CUTOFF = "m-dated", "2019-06"  # the year-falling replay and its training cutoff
# A fixed date for the git commits the script makes itself (the base run's).
os.environ.setdefault("GIT_AUTHOR_DATE", "2026-12-06T00:00:00+00:00")
os.environ.setdefault("GIT_COMMITTER_DATE", "2026-12-06T00:00:00+00:00")


class Bench:
    """The work folder: the DVC repo (built on first use, an experiment per model asked for)
    and one Chromium for every page."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.done: set[str] = set()
        self._repo: Path | None = None
        self._driver: Any = None
        self.stack = ExitStack()  # the browser, quit on close

    def repo(self, *names: str) -> Path:
        """The repo, with the workspace run ("base", committed) and experiments ``names``."""
        if self._repo is None:
            repo = make_repo(self.work / "repo", find_mirror(), predict={
                "backend": "replay", "limit": None, "replay": {"path": "runs/base.jsonl"}})
            sh(repo, "dvc", "repro", "validate")
            gold_n, gold_p = repo_gold(repo)
            for name, strength in MODELS.items():
                write_jsonl(repo / f"runs/{name}.jsonl",
                            replay_rows(name, strength, gold_n, gold_p))
            items = {t: pd.read_parquet(items_path(t, repo / "data/items")) for t in TRACKS}
            write_jsonl(repo / f"runs/{DATED}.jsonl", replay(items, "m1", 1))
            sh(repo, "dvc", "repro", "score")
            sh(repo, "git", "add", "-A")
            sh(repo, "git", "commit", "-qm", "base run and replays")
            self._repo = repo
        todo = [name for name in names if name not in self.done]
        for name in todo:
            sh(self._repo, "dvc", "exp", "run", "-n", name, "score", "-S",
               f"predict.replay.path=runs/{name}.jsonl")
            self.done.add(name)
        if todo:
            self.reset()
        return self._repo

    def reset(self) -> None:
        """The committed base run back in the workspace (an exp run leaves its outputs)."""
        assert self._repo is not None
        sh(self._repo, "git", "reset", "-q", "--hard")
        sh(self._repo, "dvc", "checkout", "-f", "score")

    def driver(self) -> Any:
        if self._driver is None:
            self._driver = self.stack.enter_context(chromium(WIDTH, HEIGHT))
            self._driver.execute_cdp_cmd("Emulation.setScrollbarsHidden", {"hidden": True})
        return self._driver

    def close(self) -> None:
        self.stack.close()


def wait(driver: Any, script: str, timeout: float = 60) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(
        lambda d: d.execute_script(script))


def shoot(driver: Any, out: Path, bottom: str, top: str = "return 0") -> None:
    """The page from ``top`` to ``bottom`` (scripts returning a y in CSS pixels), the whole
    viewport wide, as a PNG of at most 256 colours (text and flat fills: no visible loss)."""
    from PIL import Image

    width = driver.execute_script("return window.innerWidth")
    assert width == WIDTH, f"the viewport is {width} px wide, not {WIDTH}"
    y0, y1 = driver.execute_script(top), driver.execute_script(bottom)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": y0, "width": WIDTH, "height": y1 - y0, "scale": 1}})
    image = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    image.quantize(256, dither=Image.Dither.NONE).save(out, optimize=True)


def bottom_of(selector: str, index: int = 0, pad: int = 12) -> str:
    return (f"return Math.ceil(document.querySelectorAll({json.dumps(selector)})[{index}]"
            f".getBoundingClientRect().bottom + window.scrollY) + {pad}")


def rimo_eval(repo: Path, *args: str) -> None:
    sh(repo, str(BIN / "rimo-eval"), *args)


# --- the images --------------------------------------------------------------------------


def leaderboard(bench: Bench, out: Path) -> None:
    repo = bench.repo("m-weak", "m-strong")
    board = bench.work / "leaderboard3"
    rimo_eval(repo, "leaderboard", "workspace", "m-weak", "m-strong", "--out", str(board))
    driver = bench.driver()
    driver.get((board / "leaderboard.html").as_uri())
    wait(driver, "return document.readyState === 'complete' && "
                 "[...document.images].every(i => i.complete)")
    shoot(driver, out, bottom_of("figure", 1))  # the table, its notes, the two forest plots


def forest(bench: Bench, out: Path) -> None:
    repo = bench.repo("m-weak", "m-mid", "m-mid2", "m-strong")
    board = bench.work / "leaderboard5"
    rimo_eval(repo, "leaderboard", "workspace", "m-weak", "m-mid", "m-mid2", "m-strong",
              "--out", str(board))
    shutil.copyfile(board / "forest_rimo_n.png", out)


def view_grid(bench: Bench, out: Path) -> None:
    repo = bench.repo("m-weak", "m-strong")
    site = bench.work / "view-grid"
    rimo_eval(repo, "view", "m-weak", "m-strong", "--out", str(site))
    driver = bench.driver()
    driver.get((site / "index.html").as_uri())
    wait(driver, "return document.documentElement.dataset.ready === '1' && "
                 "!!document.getElementById('grid')")
    # The run headers, filters, overview and the grid's first eight rows.
    shoot(driver, out, bottom_of("#grid tr.row", 7, pad=2))


def view_item(bench: Bench, out: Path) -> None:
    """An item page of one k = 16 run of view_build.py's synthetic replies, a sample's
    reasoning opened."""
    import view_workload
    from predict_throughput import prepare_items
    from view_build import build_streamed

    work = bench.work / "k16"
    prepare_items(work)
    view_workload.POOL = 20_000  # sentences to draw from: one item is shown, not compressed
    run = view_workload.reasoning_run(work, "k16", 16, reasoning=500, answer=200, seed=16)[0]
    site = work / "site"
    build_streamed([run], site)
    for cursor in run.cursors.values():
        cursor.close()
    driver = bench.driver()
    driver.get((site / "index.html").as_uri())
    wait(driver, "return document.documentElement.dataset.ready === '1'")
    key = driver.execute_script(
        "return document.querySelector('#grid tr.row').dataset.key")  # the first RIMO-N item
    driver.execute_script("location.hash = 'item=' + encodeURIComponent(arguments[0])", key)
    wait(driver, "const i = document.getElementById('item'); return i && i.dataset.key === "
                 + json.dumps(key))
    driver.execute_script("document.querySelector('#item details.reasoning').open = true")
    wait(driver, "return !!document.querySelector('#item details.reasoning .katex')")
    # From the item's heading (the run header and filters are view_grid.png's) to the end of
    # the opened sample, at most 1,800 px.
    top = ("return Math.floor(document.querySelector('#item h2').getBoundingClientRect().top"
           " + window.scrollY) - 8")
    shoot(driver, out, "const s = document.querySelector('#item .sample').getBoundingClientRect();"
                       "const h = document.querySelector('#item h2').getBoundingClientRect();"
                       "return Math.ceil(Math.min(s.bottom + 12, h.top + 1800) + window.scrollY)",
          top)


def plots_diff(bench: Bench, out: Path) -> None:
    repo = bench.repo("m-weak", "m-strong")
    sh(repo, str(BIN / "python"), "-m", "rimo_eval.commands.plots_page", "--node-modules",
       str(ROOT / "node_modules"))
    page = bench.work / "dvc-plots"
    sh(repo, "dvc", "plots", "diff", "m-weak", "m-strong", "-o", str(page))
    driver = bench.driver()
    driver.get((page / "index.html").as_uri())
    wait(driver, "return document.querySelectorAll('svg.marks').length === 4")
    shoot(driver, out, "return Math.ceil(Math.max(...[...document.querySelectorAll("
                       "'svg.marks')].map(s => s.getBoundingClientRect().bottom + "
                       "window.scrollY))) + 12")


def accuracy_by_year(bench: Bench, out: Path) -> None:
    """The report's year chart of the year-falling replay with a training cutoff: the PNG the
    report stage embeds in report.html, decoded."""
    repo = bench.repo()
    sh(repo, "dvc", "exp", "run", "-n", DATED, "report", "-S",
       f"predict.replay.path=runs/{DATED}.jsonl", "-S", f"score.training_cutoff={CUTOFF}")
    html = (repo / "reports/report.html").read_text(encoding="utf-8")
    after = html[html.index("Accuracy by competition year"):]
    found = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=\s]+)"', after)
    assert found, "reports/report.html: no image after its 'Accuracy by competition year'"
    out.write_bytes(base64.b64decode(found.group(1)))
    # Kept (--work) for the numbers docs/accuracy_by_year.md quotes.
    shutil.copyfile(repo / "reports/breakdown.json", bench.work / f"{DATED}.breakdown.json")
    bench.reset()


@dataclass(frozen=True)
class Shot:
    make: Callable[[Bench, Path], None]
    what: str
    width: int | None = WIDTH  # None: the tool's own figure, copied


# In the order they are made (the year chart's experiment last: it runs the report stage).
IMAGES = {
    "leaderboard.png": Shot(leaderboard, "leaderboard.html of `rimo-eval leaderboard workspace "
                            "m-weak m-strong`: table, notes, the two forest plots"),
    "leaderboard_forest_rimo_n.png": Shot(forest, "forest_rimo_n.png of `rimo-eval leaderboard "
                                          "workspace m-weak m-mid m-mid2 m-strong`", None),
    "view_grid.png": Shot(view_grid, "`rimo-eval view m-weak m-strong`: run headers, "
                          "filters, the overview and the grid's first rows"),
    "view.png": Shot(view_item, "an item page of a k = 16 run of view_build.py's synthetic "
                     "replies, a sample's reasoning opened"),
    "dvc_plots_diff.png": Shot(plots_diff, "`dvc plots diff m-weak m-strong` (the project's "
                               "offline page): its four charts"),
    "accuracy_by_year.png": Shot(accuracy_by_year, "the report's 'Accuracy by competition "
                                 f"year' chart of the year-falling replay, cutoff {CUTOFF}",
                                 None),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs",
                        help="folder for the PNGs (default: docs/)")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=sorted(IMAGES),
                        help="only these images")
    parser.add_argument("--work", type=Path, default=None,
                        help="keep the runs, sites and pages in this folder (new or empty)")
    parser.add_argument("--list", action="store_true",
                        help="print each image's name, width in px (- for a tool's figure) "
                             "and what it shows")
    args = parser.parse_args()
    if args.list:
        for name, shot in IMAGES.items():
            print(f"{name}\t{shot.width or '-'}\t{shot.what}")
        return
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rimo-shots-") as tmp:
        bench = Bench(args.work or Path(tmp))
        bench.work.mkdir(parents=True, exist_ok=True)
        try:
            for name, shot in IMAGES.items():
                if args.only and name not in args.only:
                    continue
                made = bench.work / name  # then swapped in whole: never a half-written PNG
                shot.make(bench, made)
                write_bytes(args.out / name, made.read_bytes())
                print(f"{args.out / name}: {(args.out / name).stat().st_size:,} bytes",
                      flush=True)
        finally:
            bench.close()


if __name__ == "__main__":
    main()
