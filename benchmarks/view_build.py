"""``rimo-eval view`` at scale: build time, size on disk, time to the first grid in Chromium.

The workload: the 791 real items (upstream mirror through the validate stage) and one
synthetic run of k samples per item made by the real replay predict and score stages, each
sample carrying a model reply of about ``--chars`` characters of Markdown with math (as a
model backend records it in ``details``), so the item files are as heavy as real transcripts.

    .venv/bin/python benchmarks/view_build.py              # k = 1 and k = 8
    .venv/bin/python benchmarks/view_build.py --k 1 8 64   # k = 64: 50,624 samples
    .venv/bin/python benchmarks/view_build.py --quick      # k = 1, short replies, one load

Per k it prints: the build (site from the loaded run: index, markdown + nh3 of every text,
files written), the site's files and MB, the largest file, the size of data/index.js (what
the page loads at once), and the time from navigation start to the grid in the DOM in
headless Chromium from file:// (median of ``--loads`` cold loads, fresh profile each), and the
time to open one RIMO-N item with all its k samples from the grid (its script file loaded,
rendered).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from predict_throughput import prepare_items  # noqa: E402

from rimo_eval.commands.view.model import build  # noqa: E402
from rimo_eval.commands.view.site import write_site  # noqa: E402
from rimo_eval.core.tracks import TRACK_N, TRACK_P  # noqa: E402


def reply(rng: random.Random, chars: int, answer: str) -> str:
    parts, size = [], 0
    while size < chars:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        s = (f"Let $x_{{{a}}} = \\frac{{{a}}}{{{b}}}$ and consider *step {a}*: "
             f"\\[\\sum_{{i=1}}^{{{b}}} i^2 = {b * (b + 1) * (2 * b + 1) // 6}.\\] ")
        parts.append(s)
        size += len(s)
    return "".join(parts) + f"\n\nSo the answer is $\\boxed{{{answer}}}$."


def synthetic_run(work: Path, k: int, chars: int) -> Any:
    import pandas as pd

    from tests.support.view_runs import small_run

    items = work / "data/items"
    n = pd.read_parquet(items / "rimo_n.parquet")
    p = pd.read_parquet(items / "rimo_p.parquet")
    rng = random.Random(k)
    rows, details = [], {}
    for pid, gold in zip(n["problem_id"], n["answer"], strict=True):
        for j in range(k):
            ans = gold if rng.random() < 0.4 else str(rng.randint(0, 999))
            rows.append({"track": TRACK_N, "problem_id": pid, "sample": j, "prediction": ans})
            details[(TRACK_N, pid, j)] = {
                "text": reply(rng, chars, ans), "finish_reason": "stop", "extraction": "boxed",
                "usage": {"completion_tokens": chars // 4, "prompt_tokens": 200}}
    for r in p[p["gradable"]].itertuples():
        for j in range(k):
            pred = [s if rng.random() < 0.5 else reply(rng, chars // len(r.sub_solutions), "x")
                    for s in r.sub_solutions]
            rows.append({"track": TRACK_P, "problem_id": r.problem_id, "sample": j,
                         "prediction": pred})
    return small_run(work, f"k{k}", items, rows, k, details)


def first_grid_ms(site: Path, first_item: str, loads: int = 3) -> list[tuple[int, int]]:
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.support.browser import chromium  # the tests' hermetic headless Chromium

    out = []
    for _ in range(loads):
        with chromium(1400, 1000) as driver:  # a fresh profile each time: a cold load
            driver.get((site / "index.html").as_uri())
            WebDriverWait(driver, 60).until(lambda d: d.execute_script(
                "return document.documentElement.dataset.readyMs"))
            ms = int(driver.execute_script(
                "return document.documentElement.dataset.readyMs"))
            rows = driver.execute_script(
                "return document.querySelectorAll('#grid tr.row').length")
            assert rows == 791, rows
            # Then open the heaviest kind of item (RIMO-N, all k samples, histogram).
            t0 = time.perf_counter()
            driver.execute_script("location.hash = 'item=' + arguments[0]", first_item)
            WebDriverWait(driver, 60).until(lambda d: d.execute_script(
                "const i = document.getElementById('item');"
                "return i && i.dataset.key === arguments[0]", first_item))
            out.append((ms, round(1000 * (time.perf_counter() - t0))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--chars", type=int, default=1500, help="characters per reply")
    parser.add_argument("--loads", type=int, default=3, help="cold page loads per k (median)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny: k = 1, 200 characters per reply, one page load")
    args = parser.parse_args()
    if args.quick:
        args.k, args.chars, args.loads = [1], 200, 1
    print(f"{os.cpu_count()} cores, load average "
          f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())} at the start")
    print(f"| k | samples | prepare (predict + score) | build | files | MB on disk | largest file "
          f"| data/index.js | first grid, file:// (median of {args.loads}) | open one item | "
          "load |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory(prefix="rimo-view-bench-") as tmp:
        work = Path(tmp)
        prepare_items(work)
        for k in args.k:
            t0 = time.perf_counter()
            run = synthetic_run(work, k, args.chars)
            prep = time.perf_counter() - t0
            t0 = time.perf_counter()
            index, payloads, words = build([run])
            counts = write_site(work / f"site{k}", index, payloads, words)
            built = time.perf_counter() - t0
            site = work / f"site{k}"
            largest = max(f.stat().st_size for f in site.rglob("*") if f.is_file())
            index_mb = (site / "data/index.js").stat().st_size / 1e6
            timings = first_grid_ms(site, index["items"][0]["key"], args.loads)
            ms = [t[0] for t in timings]
            item_ms = statistics.median(t[1] for t in timings)
            samples = sum(len(s) for s in run.scores.values())
            print(f"| {k} | {samples} | {prep:.1f} s | {built:.1f} s | {counts['files']} | "
                  f"{counts['bytes'] / 1e6:.1f} | {largest / 1e6:.2f} MB | {index_mb:.2f} MB | "
                  f"{statistics.median(ms)} ms ({', '.join(map(str, ms))}) | {item_ms} ms | "
                  f"{os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
