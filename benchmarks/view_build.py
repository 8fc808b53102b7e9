"""``rimo-eval view`` at scale: build time, size on disk, time to the first grid in Chromium.

The workload: the 791 real items (upstream mirror through the validate stage) and one
synthetic run of k samples per item made by the real replay predict and score stages, each
sample carrying a model reply of about ``--chars`` characters of Markdown with math (as a
model backend records it in ``details``), so the item files are as heavy as real transcripts.

    .venv/bin/python benchmarks/view_build.py              # k = 1 and k = 8
    .venv/bin/python benchmarks/view_build.py --k 1 8 64   # k = 64: 50,624 samples
    .venv/bin/python benchmarks/view_build.py --quick      # k = 1, short replies, one load
    .venv/bin/python benchmarks/view_build.py --k 16 64 --reasoning-chars 32000 --pair

The reasoning workload (``--reasoning-chars``, issue 33): every reply (a RIMO-N sample, a
RIMO-P part) is ``--answer-chars`` (2,000) of answer plus that much reasoning, prose-like
text with math that compresses like real text (``Prose``: it prints how the view's
compression does on it and on the benchmark's real reference solutions). Per k it builds
one run's site (and with ``--pair`` two runs' side by side) in a fresh process, so the peak
RSS printed is the build's, and prints the reply text against the site on disk, the first
grid, an item with all its k samples and one sample's reasoning opened and rendered
(Chromium, file://).

Per k it prints: the build (site from the loaded run: index, each item's texts packed,
files written), the site's files and MB, the largest file, the size of data/index.js (what
the page loads at once), and the time from navigation start to the grid in the DOM in
headless Chromium from file:// (median of ``--loads`` cold loads, fresh profile each), and the
time to open one RIMO-N item with all its k samples from the grid (its script file loaded,
rendered).
"""

from __future__ import annotations

import argparse
import os
import shutil
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
from view_workload import (  # noqa: E402
    Prose,
    expanded_run,
    load_small,
    reasoning_run,
    synthetic_run,
)

from rimo_eval.commands.view.model import build  # noqa: E402
from rimo_eval.commands.view.site import write_site  # noqa: E402


def first_grid_ms(site: Path, first_item: str, loads: int = 3
                  ) -> list[tuple[int, int, int | None]]:
    """Per cold load: navigation start to the grid (ms), then opening ``first_item`` (all its
    k samples, histogram) from the grid, then its sample's reasoning opened and rendered (None
    when the sample has none)."""
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
            item_ms = round(1000 * (time.perf_counter() - t0))
            # Then one sample's reasoning, opened: its first block rendered, math and all.
            reasoning_ms = driver.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "const d = document.querySelector('details.reasoning');"
                "if (!d) return done(null);"
                "const t0 = performance.now(); d.open = true;"
                "const check = () => d.querySelector('.fold-first, .fold > p, .fold')"
                " && (d.querySelector('.katex') || !d.querySelector('.math'))"
                " ? requestAnimationFrame(() => done(Math.round(performance.now() - t0)))"
                " : setTimeout(check, 5);"
                "check();")
            out.append((ms, item_ms, reasoning_ms))
    return out


def _tree(pid: int) -> list[int]:
    out = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                for child in f.read().split():
                    out += _tree(int(child))
    except OSError:  # gone while read
        pass
    return out


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            return next((int(x.split()[1]) for x in f if x.startswith("Pss:")), 0)
    except OSError:
        return 0


def _build_child(spec: dict[str, Any], out: Path, queue: Any, memory: bool) -> None:
    """The build alone, in a fresh process; with ``memory``, its peak memory: the peak over the
    build of the summed proportional set size (PSS) of this process and the workers it forks
    (view/workers.py), sampled every 0.1 s: a worker shares the tables it was forked with,
    which PSS counts once where summed RSS would count them in every process. A sample walks
    the page tables of every process (22 ms of kernel CPU at k = 64, 8% of a 2-core machine
    at this rate), so a timed build is never a sampled one."""
    import threading

    runs = [load_small(**r) for r in spec["runs"]]
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], sum(_pss_kib(p) for p in _tree(os.getpid())))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    if memory:
        sampler.start()
    t0 = time.perf_counter()
    index = build_streamed(runs, out, spec.get("search_reasoning", False))
    built = time.perf_counter() - t0
    done.set()
    if memory:
        sampler.join()
    queue.put((built, index, peak[0] / 1024 if memory else None))


def build_streamed(runs: list[Any], out: Path, search_reasoning: bool = False
                   ) -> dict[str, Any]:
    """As ``rimo-eval view`` builds: item by item, written as made (by its worker processes,
    one per CPU)."""
    from rimo_eval.commands.view.model import Site
    from rimo_eval.commands.view.site import write_with
    from rimo_eval.commands.view.workers import write_items

    site = Site(runs, search_reasoning=search_reasoning)
    index: dict[str, Any] = {}

    def finish() -> tuple[dict[str, Any], list[str]]:
        index.update(site.index())
        return index, site.words

    write_with(out, lambda tmp: write_items(site, tmp), finish)
    return index


def build_in_child(spec: dict[str, Any], out: Path, memory: bool = False
                   ) -> tuple[float, dict[str, Any], float | None]:
    """(build seconds, the index, peak memory in MiB with ``memory``, else None)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_build_child, args=(spec, out, queue, memory))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def packed_ratio(text: str) -> float:
    """The view's compression of 1 MB of ``text`` (packing.LEVEL), against its size."""
    import zstandard

    from rimo_eval.commands.view.packing import LEVEL

    raw = text.encode("utf-8")[: 1 << 20]
    return len(zstandard.ZstdCompressor(level=LEVEL).compress(raw)) / len(raw)


def solutions(work: Path) -> str:
    """The benchmark's own reference solutions (real olympiad prose with math), joined: how
    real text of this kind compresses."""
    import pandas as pd

    n = pd.read_parquet(work / "data/items/rimo_n.parquet")
    p = pd.read_parquet(work / "data/items/rimo_p.parquet")
    return "\n\n".join([*map(str, n["solution"]),
                         *(str(x) for xs in p["sub_solutions"] for x in xs)])


def reasoning_main(args: argparse.Namespace) -> None:
    """The reasoning workload (issue 33): per k, one run (and with ``--pair`` two runs side by
    side), built in child processes (``--builds`` timed, one more for its peak memory), the
    site's size against the reply text."""
    print(f"| k | runs | replies | reply text | prepare | build (median of {args.builds}) | "
          "peak memory (PSS, build + "
          "workers) | site on disk | site / text | largest file | data/index.js | first grid "
          "(median) | item, all k samples | one reasoning rendered | load |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
          "| ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory(prefix="rimo-view-bench-") as tmp:
        work = Path(args.work or tmp)
        if not (work / "data/items/rimo_n.parquet").is_file():
            prepare_items(work)
        synthetic = packed_ratio(Prose(0).text(1 << 20))
        print(f"zstd (the view's level) of 1 MB: the synthetic reasoning {synthetic:.3f} of its "
              f"size, the real reference solutions {packed_ratio(solutions(work)):.3f}")
        for k in args.k:
            t0 = time.perf_counter()
            names = [f"k{k}"] + ([f"k{k}b"] if args.pair else [])
            if args.expand_from and k != args.expand_from:
                base = args.expand_from
                if k % base:
                    raise SystemExit(f"--expand-from {base}: k = {k} is not a multiple of it")
                for i in range(len(names)):  # the runs it is made from, prepared first
                    made_from = reasoning_run(work, f"k{base}" + ("b" if i else ""), base,
                                              args.reasoning_chars, args.answer_chars,
                                              seed=base + 1000 * i)[0]
                    for c in made_from.cursors.values():
                        c.close()
                made = [expanded_run(work, f"k{base}" + ("b" if i else ""), nm, k // base,
                                     seed=k + 1000 * i) for i, nm in enumerate(names)]
            else:
                made = [reasoning_run(work, nm, k, args.reasoning_chars, args.answer_chars,
                                      seed=k + 1000 * i) for i, nm in enumerate(names)]
            prep = time.perf_counter() - t0
            runs, text = [m[0] for m in made], sum(m[1] for m in made)
            replies = sum(m[2] for m in made)
            for r in runs:
                for c in r.cursors.values():
                    c.close()
            del runs, made
            for count in ([1, 2] if args.pair else [1]):
                spec = {"runs": [{"base": str(work / nm), "items": str(work / "data/items"),
                                  "name": nm} for nm in names[:count]]}
                spec["search_reasoning"] = args.search_reasoning
                site = work / f"site{k}-{count}"
                builds = []
                for _ in range(args.builds):  # timed, unsampled; the same site each time
                    shutil.rmtree(site, ignore_errors=True)
                    built, index, _ = build_in_child(spec, site)
                    builds.append(built)
                shutil.rmtree(site, ignore_errors=True)
                _, index, rss = build_in_child(spec, site, memory=True)
                built = statistics.median(builds)
                spread = f" ({min(builds):.1f}-{max(builds):.1f})" if len(builds) > 1 else ""
                size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
                largest = max(f.stat().st_size for f in site.rglob("*") if f.is_file())
                index_mb = (site / "data/index.js").stat().st_size / 1e6
                timings = first_grid_ms(site, index["items"][0]["key"], args.loads)
                grid = statistics.median(t[0] for t in timings)
                item = statistics.median(t[1] for t in timings)
                rs = [t[2] for t in timings if t[2] is not None]
                share = text if count == len(names) else text // len(names)
                print(f"| {k} | {count} | {replies * count // len(names):,} | "
                      f"{share / 2**20:,.0f} MiB | {prep:.1f} s | {built:.1f} s{spread} | "
                      f"{rss or 0:,.0f} MiB | "
                      f"{size / 2**20:,.0f} MiB | {size / share:.2f} | {largest / 1e6:.2f} MB | "
                      f"{index_mb:.2f} MB | {grid:.0f} ms | {item:.0f} ms | "
                      f"{statistics.median(rs) if rs else '-'} ms | "
                      f"{os.getloadavg()[0]:.2f} |", flush=True)
                shutil.rmtree(site)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--chars", type=int, default=1500, help="characters per reply")
    parser.add_argument("--reasoning-chars", type=int, default=0,
                        help="the reasoning workload: characters of reasoning per reply "
                             "(prose-like, with math; e.g. 32000), built in a child process")
    parser.add_argument("--answer-chars", type=int, default=2000,
                        help="with --reasoning-chars: characters of the answer per reply")
    parser.add_argument("--pair", action="store_true",
                        help="with --reasoning-chars: also two runs side by side")
    parser.add_argument("--search-reasoning", action="store_true",
                        help="with --reasoning-chars: build as `rimo-eval view "
                             "--search-reasoning` (the search covers every reasoning)")
    parser.add_argument("--work", type=Path, default=None,
                        help="with --reasoning-chars: keep the prepared runs in this folder "
                             "and reuse them when run again (a k = 64 pair takes minutes)")
    parser.add_argument("--expand-from", type=int, default=0,
                        help="with --reasoning-chars: make each k-sample run from the run of "
                             "this k (prepared first), every sample repeated with fresh text "
                             "(expanded_run): k = 64 without 12 GB of preparation")
    parser.add_argument("--loads", type=int, default=3, help="cold page loads per k (median)")
    parser.add_argument("--builds", type=int, default=1,
                        help="with --reasoning-chars: timed builds per row (median and range); "
                             "the memory is another build's, sampled")
    parser.add_argument("--quick", action="store_true",
                        help="tiny: k = 1, 200 characters per reply, one page load; with "
                             "--reasoning-chars, k = 1, 2,000 characters of reasoning")
    args = parser.parse_args()
    if args.quick:
        args.k, args.chars, args.loads = [1], 200, 1
        args.reasoning_chars = min(args.reasoning_chars, 2000)
        args.answer_chars = min(args.answer_chars, 200)
    print(f"{os.cpu_count()} cores, load average "
          f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())} at the start")
    if args.reasoning_chars:
        reasoning_main(args)
        return
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
            item_ms = statistics.median(t[1] for t in timings)  # (grid, item, reasoning)
            samples = sum(len(s) for s in run.scores.values())
            print(f"| {k} | {samples} | {prep:.1f} s | {built:.1f} s | {counts['files']} | "
                  f"{counts['bytes'] / 1e6:.1f} | {largest / 1e6:.2f} MB | {index_mb:.2f} MB | "
                  f"{statistics.median(ms)} ms ({', '.join(map(str, ms))}) | {item_ms} ms | "
                  f"{os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
