"""What each start-up/teardown tuning of ``rimo-eval predict`` buys (issue 17 §5), side by side.

The workload is RIMO itself (791 items, 1579 requests, RIMO-P parts chained) against the
loopback fake server (its own process) at ``--latency`` (default 0: the tunings' best case) and
c = 64, on a cold response cache each time. Every row is one ``predict`` process; the variants
run interleaved, ``--repeats`` times each, and the table gives the median wall time and its
difference from the plain process:

* ``plain``: ``sys.exit(main())``, the default collector (the project as it is);
* ``+gc``: ``gc.set_threshold(100_000, 20, 20)`` first;
* ``+os._exit``: the exit handlers by hand, then ``os._exit`` (no interpreter teardown);
* ``both``: what ``cli.entry`` did before they were removed.

The ``+syncfs`` variant of the per-file cache (one ``syncfs(2)`` instead of an fsync per entry)
is gone: the SQLite cache's batched sync is three fsyncs a second whatever the number of
entries, and replacing it meant patching the cache's internals.

    .venv/bin/python benchmarks/engine_tuning.py [--repeats 3] [--latency 0]
    .venv/bin/python benchmarks/engine_tuning.py --quick   # 16 items per track, one run each
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from predict_throughput import (  # noqa: E402
    loopback_server,
    prepare_items,
    write_predict_params,
)
from timed import run_timed  # noqa: E402

GC = "import gc; gc.set_threshold(100_000, 20, 20)\n"
PLAIN_EXIT = "import sys\nfrom rimo_eval.cli import main\nsys.exit(main())\n"
FAST_EXIT = '''import atexit, os, sys
from rimo_eval.cli import main
status = main()
atexit._run_exitfuncs()
sys.stdout.flush(); sys.stderr.flush()
os._exit(status)
'''
VARIANTS = {
    "plain": PLAIN_EXIT,
    "+gc": GC + PLAIN_EXIT,
    "+os._exit": FAST_EXIT,
    "both": GC + FAST_EXIT,
}


def run_once(work: Path, base_url: str, code: str, concurrency: int, n: int,
             limit: int | None) -> float:
    write_predict_params(work, base_url, concurrency, str(work / f"cache-{n}"), limit)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    done = run_timed([sys.executable, "-c", code, "predict"], work, env, stderr_only=True)
    if done.returncode != 0:
        raise SystemExit(f"predict failed ({done.returncode}):\n{done.output[-3000:]}")
    return done.wall_s


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--limit", type=int, default=None, help="items per track (default: all)")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--quick", action="store_true",
                        help="tiny: 16 items per track, one run of plain and both")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.limit, args.variants = 1, 16, ["plain", "both"]
    if "plain" not in args.variants:
        args.variants.insert(0, "plain")
    walls: dict[str, list[float]] = {v: [] for v in args.variants}
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp, loopback_server(args.latency) as base_url:
        work = Path(tmp)
        prepare_items(work)
        n = 0
        for _ in range(args.repeats):
            for name in args.variants:  # interleaved: load drifts hit all alike
                n += 1
                walls[name].append(run_once(work, base_url, VARIANTS[name], args.concurrency,
                                            n, args.limit))
    scope = "1579 requests" if args.limit is None else f"{args.limit} items per track"
    print(f"predict, {scope}, c = {args.concurrency}, latency {args.latency} s, "
          f"{args.repeats} runs each, load average {load} at the start, "
          f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())} at the end, "
          f"{os.cpu_count()} CPUs")
    base = statistics.median(walls["plain"])
    print(f"{'variant':<10} {'median s':>9} {'vs plain':>9}  runs")
    for name, got in walls.items():
        med = statistics.median(got)
        print(f"{name:<10} {med:9.3f} {med - base:+9.3f}  "
              + " ".join(f"{w:.2f}" for w in got))


if __name__ == "__main__":
    main()
