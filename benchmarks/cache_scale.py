"""The response cache at scale (issues 20 and 30): a million entries of about 3 KB replies,
today's code and a baseline side by side, in one run.

The database is built once (``--entries``, default 1,000,000: each a real OpenAI-shaped request
and a reply of ``--reply-bytes`` of text-like words, zstd-compressed as ``put`` does; stored
in insertion order with ``created`` rising over 100 days, so ``prune --older-than 50d`` deletes
the older half, the front of the file) with the schema of the baseline code, then copied for
each code under test. The code under test opens it for the first time with ``cache stats``
(the one-time count of an older cache: its tallies and label index), timed apart. Per code,
each in its own process (``PYTHONPATH``: that code's ``stages``):

* open: ``ResponseCache(root)`` plus one lookup, median of 20 (a fresh object each time);
* ``cache stats`` and ``cache verify``: the whole command (``--no-verify`` skips it);
* ``cache prune --older-than 50d``: the whole command, the files before and after, the WAL's
  peak (its size sampled every 10 ms);
* open after a kill: a second copy, its prune killed (``kill -9``) after ``--kill-after`` s;
  the WAL left behind and the first open (which reads that WAL) plus one lookup;
* a damaged page: one page of that copy overwritten, then ``cache verify --recover`` (the
  baseline has no ``--recover``: its ``verify`` is run, and what it does is recorded).

Then, as in issue 20: ``put``/``get`` of ``--replies`` reasoning replies (32 KB reasoning + 2 KB
answer) and of short ones, with the bytes on disk against the per-file layout of 0.1.0 (each
file rounded up to 4 KiB blocks; that layout's code is gone since 1.0, its figures stay in
benchmarks/README.md).

Mind the disk: a million entries take about 2 GB and each code gets two copies; everything is
in one temporary folder, deleted at the end. ``cat /proc/loadavg`` is printed at the start and
at the end: the machine is shared, prefer the ratios.

    .venv/bin/python benchmarks/cache_scale.py [--entries 1000000] [--baseline REV]
    .venv/bin/python benchmarks/cache_scale.py --quick   # 3,000 entries, no baseline
    .venv/bin/python benchmarks/cache_scale.py --baseline REV --prune-only   # the prune rows
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import old_tree  # noqa: E402

from rimo_eval.chat.cache import DB_NAME, ResponseCache, request_key  # noqa: E402
from rimo_eval.io.hashing import canonical_json  # noqa: E402

BASELINE = "ec772a7"  # main before issue 30
# Where the children run: from ROOT, ``python -m rimo_eval`` and ``-c`` would import this
# checkout's package ahead of PYTHONPATH's, whatever code is under test.
NEUTRAL = Path("/")
DAY = 86400.0
WORDS = ("let", "the", "integer", "prime", "divides", "so", "we", "have", "mod", "hence",
         "consider", "case", "$n$", "$p$", "$k^2$", "\\frac{a}{b}", "=", "+", "therefore",
         "contradiction", "assume", "sum", "over", "all", "triangle", "angle", "equal", "lemma",
         "by", "induction", "on", "claim", "holds", "for", "every", "positive", "odd", "even",
         "square", "root", "of", "unity", "polynomial", "degree", "at", "most", "bound", "wait")

# Run inside a child process with the code under test on PYTHONPATH.
_OPEN = """
import json, statistics, sys, time
from {package}.chat.cache import ResponseCache
root, key = sys.argv[1], sys.argv[2]
times = []
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    cache = ResponseCache(root)
    cache.get(key, {"q": 1})
    times.append(time.perf_counter() - start)
    cache.close()
print(json.dumps({"first_ms": times[0] * 1000, "median_ms": statistics.median(times) * 1000}))
"""


def text(rng: random.Random, size: int) -> str:
    out, n = [], 0
    while n < size:
        word = rng.choice(WORDS) + (f"{rng.randint(0, 999)}" if rng.random() < 0.1 else "")
        out.append(word)
        n += len(word) + 1
    return " ".join(out)[:size]


def load() -> str:
    return Path("/proc/loadavg").read_text().strip()


def entry(i: int, n: int, now: float, pool: list[str], prompts: list[str],
          compressor: zstandard.ZstdCompressor) -> tuple[Any, ...]:
    payload = {"endpoint": {"transport": "openai-chat", "base_url": "http://127.0.0.1:8000/v1"},
               "request": {"model": "m", "max_tokens": 4096, "messages": [
                   {"role": "user", "content": f"Problem {i}: {prompts[i % len(prompts)]}"}]}}
    reply = {"texts": [f"{i}: {pool[i % len(pool)]}"], "finish_reasons": ["stop"],
             "usage": {"prompt_tokens": 150, "completion_tokens": 700}, "model": "m",
             "latency_s": 1.0, "reasoning": []}
    data = canonical_json({"request": payload, "response": reply}).encode("utf-8")
    created = now - 100 * DAY + 100 * DAY * i / n  # insertion order is age order
    return (request_key(payload), "m", "http://127.0.0.1:8000/v1", created, len(data),
            compressor.compress(data))


def child_env(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code), "TQDM_DISABLE": "1"}


def build(root: Path, n: int, reply_bytes: int, code: Path) -> dict[str, float]:
    """The database as ``code`` makes it (its schema), then n entries in bulk."""
    root.mkdir(parents=True)
    package = old_tree.package(code)
    subprocess.run([sys.executable, "-c", f"import sys\nfrom {package}.chat.cache import "
                    "ResponseCache\nc = ResponseCache(sys.argv[1])\nc.put('0' * 64, {'q': 0}, "
                    "{'texts': ['0']})\nc.close()", str(root)],
                   env=child_env(code), cwd=NEUTRAL, check=True)
    rng = random.Random(30)
    pool = [text(rng, reply_bytes) for _ in range(64)]
    prompts = [text(rng, 600) for _ in range(64)]
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    started, now = time.perf_counter(), time.time()
    conn = sqlite3.connect(root / DB_NAME, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("DELETE FROM entries")
    for start in range(0, n, 20_000):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)",
                         (entry(i, n, now, pool, prompts, compressor)
                          for i in range(start, min(n, start + 20_000))))
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {"build_s": time.perf_counter() - started,
            "db_bytes": (root / DB_NAME).stat().st_size}


def files(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in root.iterdir() if p.name.startswith(DB_NAME)
            and not p.name.endswith(("-shm",)) and ".damaged" not in p.name}


def cli(code: Path, *args: str, timeout: float = 3600) -> tuple[float, int, str, str]:
    """One ``rimo-eval cache ...`` process of ``code``: (wall, exit code, stdout, stderr)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", old_tree.package(code), "cache", *args],
                          cwd=NEUTRAL, env=child_env(code), capture_output=True, text=True,
                          timeout=timeout)
    return time.perf_counter() - started, done.returncode, done.stdout, done.stderr


def open_ms(code: Path, root: Path, repeats: int = 20) -> dict[str, float]:
    child = _OPEN.replace("{package}", old_tree.package(code))
    out = subprocess.run([sys.executable, "-c", child, str(root), f"{12345:064x}", str(repeats)],
                         env=child_env(code), cwd=NEUTRAL, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


class WalPeak:
    """The largest size of ``root``'s WAL while the block runs (sampled every 10 ms)."""

    def __init__(self, root: Path) -> None:
        self.wal, self.peak, self._stop = root / f"{DB_NAME}-wal", 0, threading.Event()

    def __enter__(self) -> WalPeak:
        def sample() -> None:
            while not self._stop.wait(0.01):
                with contextlib.suppress(FileNotFoundError):
                    self.peak = max(self.peak, self.wal.stat().st_size)
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def killed_prune(code: Path, root: Path, after_s: float) -> dict[str, Any]:
    """Prune, kill -9 after ``after_s`` seconds; the WAL left and the first open after it."""
    proc = subprocess.Popen([sys.executable, "-m", old_tree.package(code), "cache", "prune",
                             "--dir",
                             str(root), "--older-than", "50d"], cwd=NEUTRAL,
                            env=child_env(code), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    with WalPeak(root) as wal:
        time.sleep(after_s)
        finished = proc.poll() is not None  # (poll reaps it: then there is no pid to kill)
        if not finished:
            proc.kill()  # SIGKILL
        proc.wait()
    left = files(root).get(f"{DB_NAME}-wal", 0)
    opened = open_ms(code, root, repeats=5)
    return {"killed_after_s": after_s, "finished_before_kill": finished,
            "wal_peak_bytes": wal.peak, "wal_left_bytes": left,
            "open_after_kill_ms": opened["first_ms"], "open_after_kill_median_ms":
            opened["median_ms"]}


def damaged_page(code: Path, root: Path, new: bool) -> dict[str, Any]:
    """Overwrite one table page in the middle, then verify --recover (verify for the
    baseline, which has no --recover)."""
    conn = sqlite3.connect(root / DB_NAME)
    leaves = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = 'entries' "
                                         "AND pagetype = 'leaf' ORDER BY pageno")]
    conn.close()
    page = leaves[len(leaves) // 2]
    with open(root / DB_NAME, "r+b") as fh:
        fh.seek((page - 1) * 4096)
        fh.write(random.Random(page).randbytes(4096))
    stats = cli(code, "stats", "--dir", str(root))
    args = ["verify", "--dir", str(root)] + (["--recover", "--json"] if new else [])
    wall, rc, out, err = cli(code, *args)
    row: dict[str, Any] = {"page": page, "stats_exit": stats[1],
                           "stats_said": (stats[3].strip().splitlines() or [""])[-1][:160],
                           "verify_s": wall, "verify_exit": rc,
                           "verify_said": (err.strip().splitlines() or [""])[-1][:160]}
    if new and rc == 0:
        row.update(json.loads(out))
    return row


def copy(source: Path, into: Path) -> None:
    """A copy of the database, on the disk before it is timed: otherwise the first fsync of
    the code under test (a checkpoint) also writes out the 2 GB of the copy itself, which no
    real cache has waiting (it made a prune read 38.5 s instead of 29.5 s)."""
    shutil.copytree(source, into)
    os.sync()


def one_code(label: str, code: Path, base: Path, source: Path, args: argparse.Namespace,
             new: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"code": label}
    main_copy, kill_copy = base / f"{label}-a", base / f"{label}-b"
    copy(source, main_copy)
    if new:  # the first command on a cache of an older version counts its entries once
        row["first_stats_s"], rc, _, err = cli(code, "stats", "--dir", str(main_copy))
        assert rc == 0, err
    row.update({f"open_{k}": v for k, v in open_ms(code, main_copy).items()})
    row["stats_s"], rc, out, err = cli(code, "stats", "--dir", str(main_copy), "--json")
    row["stats_exit"] = rc
    if rc == 0:
        row["stats_entries"] = json.loads(out)["entries"]
    if args.verify and not args.prune_only:
        row["verify_s"], row["verify_exit"], _, _ = cli(code, "verify", "--dir",
                                                        str(main_copy))
    before = files(main_copy)
    with WalPeak(main_copy) as wal:
        row["prune_s"], rc, _, err = cli(code, "prune", "--dir", str(main_copy),
                                         "--older-than", "50d")
    assert rc == 0, err
    after = files(main_copy)
    row.update(prune_wal_peak_bytes=wal.peak, file_before_bytes=sum(before.values()),
               file_after_bytes=sum(after.values()),
               file_ratio=sum(after.values()) / sum(before.values()))
    row.update({f"after_prune_{k}": v for k, v in open_ms(code, main_copy).items()})
    shutil.rmtree(main_copy)
    copy(source, kill_copy)
    if new:
        cli(code, "stats", "--dir", str(kill_copy))  # as above: the one-time count first
    row.update(killed_prune(code, kill_copy, args.kill_after))
    if not args.prune_only:
        row.update({f"damaged_{k}": v for k, v in damaged_page(code, kill_copy, new).items()})
    shutil.rmtree(kill_copy)
    return row


def baseline_tree(rev: str, into: Path) -> Path | None:
    return old_tree.extract(ROOT, rev, into)


# --- issue 20's figures: put/get per reply -------------------
def short_workload(root: Path, n: int) -> dict[str, float]:
    """``put`` and ``get`` of short replies (a boxed answer), the k = 16 zero-latency case."""
    cache = ResponseCache(root)
    payloads = [{"endpoint": {"transport": "openai-chat", "base_url": "http://127.0.0.1:8/v1"},
                 "request": {"model": "m", "max_tokens": 1000, "messages": [
                     {"role": "user", "content": f"Problem {i} " * 60}]}} for i in range(n)]
    keys = [request_key(p) for p in payloads]
    reply = {"texts": ["Working through it carefully, the answer is \\boxed{3}."],
             "finish_reason": "stop", "latency_s": 0.01,
             "usage": {"prompt_tokens": 100, "completion_tokens": 20}}
    start = time.perf_counter()
    for key, payload in zip(keys, payloads, strict=True):
        cache.put(key, payload, reply)
    put_s = time.perf_counter() - start
    start = time.perf_counter()
    for key, payload in zip(keys, payloads, strict=True):
        assert cache.get(key, payload) == reply
    get_s = time.perf_counter() - start
    cache.close()
    return {"short_put_us": put_s / n * 1e6, "short_get_us": get_s / n * 1e6}


def reasoning_workload(root: Path, n: int) -> dict[str, float]:
    rng = random.Random(20)
    cache = ResponseCache(root)
    payloads, put_s, per_file = [], 0.0, 0
    for i in range(n):
        payload = {"endpoint": {"transport": "openai-chat", "base_url": "http://127.0.0.1:8000/v1"},
                   "request": {"model": "r1", "messages": [
                       {"role": "user", "content": f"Problem {i}: {text(rng, 600)}"}],
                       "max_tokens": 32768, "temperature": 0.6}}
        reply = {"texts": [text(rng, 2048)], "reasoning": text(rng, 32768),
                 "finish_reason": "stop", "latency_s": 1.0,
                 "usage": {"prompt_tokens": 200, "completion_tokens": 9000}}
        key = request_key(payload)
        old = canonical_json({"format": 1, "key": key, "request": payload, "response": reply})
        per_file += -(-len(old.encode()) // 4096) * 4096
        start = time.perf_counter()
        cache.put(key, payload, reply)
        put_s += time.perf_counter() - start
        payloads.append((key, payload))
    cache.sync()
    start = time.perf_counter()
    for key, payload in payloads:
        assert cache.get(key, payload) is not None
    get_s = time.perf_counter() - start
    conn = cache.connection()
    assert conn is not None
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cache.close()
    disk = sum(p.stat().st_size for p in root.iterdir())
    return {"put_us": put_s / n * 1e6, "get_us": get_s / n * 1e6, "db_bytes": disk,
            "per_file_bytes": per_file, "ratio": disk / per_file}


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def report(rows: list[dict[str, Any]], built: dict[str, float], n: int) -> str:
    lines = [f"{n:,} entries, {mib(built['db_bytes'])} (built in {built['build_s']:.0f} s)",
             "| | " + " | ".join(r["code"] for r in rows) + " |",
             "| --- |" + " ---: |" * len(rows)]

    def line(label: str, fmt: Any) -> None:
        cells = []
        for r in rows:
            try:
                cells.append(fmt(r))
            except (KeyError, TypeError):
                cells.append("-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    line("first command on this cache (one-time count)", lambda r: f"{r['first_stats_s']:.1f} s")
    line("open + first lookup (median of 20)", lambda r: f"{r['open_median_ms']:.2f} ms")
    line("`cache stats`", lambda r: f"{r['stats_s']:.2f} s")
    line("`cache verify`", lambda r: f"{r['verify_s']:.1f} s")
    line("`cache prune --older-than 50d`", lambda r: f"{r['prune_s']:.1f} s")
    line("files before / after prune", lambda r: f"{mib(r['file_before_bytes'])} / "
         f"{mib(r['file_after_bytes'])} ({r['file_ratio']:.0%})")
    line("WAL peak during prune", lambda r: mib(r["prune_wal_peak_bytes"]))
    line("open after prune (median)", lambda r: f"{r['after_prune_median_ms']:.2f} ms")
    line("prune killed: WAL left", lambda r: f"{mib(r['wal_left_bytes'])} after "
         f"{r['killed_after_s']:.0f} s")
    line("first open + lookup after that kill", lambda r: f"{r['open_after_kill_ms']:.1f} ms")
    line("damaged page: `cache stats`", lambda r: f"exit {r['damaged_stats_exit']}")
    line("damaged page: `verify` (`--recover` now)", lambda r: (
        f"{r['damaged_verify_s']:.1f} s, recovered {r['damaged_recovered']:,} of "
        f"{r['damaged_expected']:,}, lost {r['damaged_lost']}" if "damaged_recovered" in r
        else f"{r['damaged_verify_s']:.1f} s, exit {r['damaged_verify_exit']}: "
             f"{r['damaged_verify_said']}"))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--reply-bytes", type=int, default=3000)
    parser.add_argument("--baseline", default=BASELINE,
                        help=f"git revision of today's code (default {BASELINE}); 'none'")
    parser.add_argument("--no-verify", dest="verify", action="store_false")
    parser.add_argument("--kill-after", type=float, default=8.0,
                        help="seconds into the prune that is killed")
    parser.add_argument("--replies", type=int, default=2000)
    parser.add_argument("--prune-only", action="store_true",
                        help="open, stats, prune and the killed prune only: no verify, no "
                             "damaged page, no put/get workloads (issue 42's prune figures)")
    parser.add_argument("--quick", action="store_true",
                        help="3,000 entries, no baseline: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.entries, args.baseline, args.replies = 3000, "none", 20
        args.kill_after = 0.5
    print(f"load average: {load()}", file=sys.stderr)
    result: dict[str, Any] = {"load_start": load(), "entries": args.entries}
    with tempfile.TemporaryDirectory(prefix="rimo-cache-bench-") as tmp:
        base = Path(tmp)
        old = None if args.baseline == "none" else baseline_tree(args.baseline, base / "old")
        source = base / "source"
        built = build(source, args.entries, args.reply_bytes, old or ROOT)
        print(f"built {args.entries:,} entries: {mib(built['db_bytes'])} in "
              f"{built['build_s']:.0f} s", file=sys.stderr)
        rows = [one_code("now", ROOT, base, source, args, new=True)]
        if old is not None:
            rows.append(one_code(f"baseline {args.baseline}", old, base, source, args,
                                 new=False))
        shutil.rmtree(source)
        result.update(built=built, rows=rows)
        issue20: dict[str, Any] = {}
        if args.prune_only:
            args.replies = 0
        if args.replies:
            issue20.update(reasoning_workload(base / "reasoning", args.replies))
        if not args.prune_only:
            issue20.update(short_workload(base / "short", 3000))
        result["issue20"] = issue20
    result["load_end"] = load()
    print(json.dumps(result, indent=2))
    print(report(rows, built, args.entries), file=sys.stderr)
    print(f"load average at the end: {result['load_end']}", file=sys.stderr)


if __name__ == "__main__":
    main()
