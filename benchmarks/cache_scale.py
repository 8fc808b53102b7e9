"""The response cache at scale (issue 20): open time, disk use, put and get cost, side by side
with the per-file layout it replaced.

* open: ``ResponseCache(root)`` plus its first lookup, at ``--entries`` (default 2,000,000)
  entries built synthetically (one transaction of small rows: the open cost does not depend on
  the entries' size), median of 20; and the per-file layout's open (its scan for stale
  temporary files, ``cache_legacy.clean_stale``) at ``--legacy-entries`` files, whose cost
  grows with the count;
* disk and CPU for the reasoning workload: ``--replies`` replies of 32 KB reasoning + 2 KB
  answer, each in a real OpenAI-shaped request: bytes on disk (the database with its WAL
  checkpointed, against the per-file layout's files rounded up to 4 KiB blocks, as ext4 stores
  them), and ``put`` / ``get`` microseconds per reply.

The reply text is generated from a fixed vocabulary of math words (seeded), so it compresses
roughly like prose, not like a repeated string.

    .venv/bin/python benchmarks/cache_scale.py [--entries 2000000] [--replies 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stages.chat import cache_legacy  # noqa: E402
from stages.chat.cache import DB_NAME, ResponseCache, request_key  # noqa: E402
from stages.core.hashing import canonical_json  # noqa: E402

WORDS = ("let", "the", "integer", "prime", "divides", "so", "we", "have", "mod", "hence",
         "consider", "case", "$n$", "$p$", "$k^2$", "\\frac{a}{b}", "=", "+", "therefore",
         "contradiction", "assume", "sum", "over", "all", "triangle", "angle", "equal", "lemma",
         "by", "induction", "on", "claim", "holds", "for", "every", "positive", "odd", "even",
         "square", "root", "of", "unity", "polynomial", "degree", "at", "most", "bound", "wait")


def text(rng: random.Random, size: int) -> str:
    out, n = [], 0
    while n < size:
        word = rng.choice(WORDS) + (f"{rng.randint(0, 999)}" if rng.random() < 0.1 else "")
        out.append(word)
        n += len(word) + 1
    return " ".join(out)[:size]


def build_synthetic(root: Path, n: int) -> float:
    root.mkdir(parents=True)
    ResponseCache(root).put("0" * 64, {"q": 0}, {"texts": ["0"]})  # the schema, as made
    start = time.perf_counter()
    conn = sqlite3.connect(root / DB_NAME)
    conn.execute("PRAGMA synchronous = OFF")
    with conn:
        conn.executemany("INSERT OR IGNORE INTO entries VALUES (?, 'm', 'e', 0, 10, x'00')",
                         ((f"{i:064x}",) for i in range(1, n)))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - start


def open_ms(root: Path, repeats: int = 20) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        cache = ResponseCache(root)
        cache.get(f"{12345:064x}", {"q": 1})
        times.append(time.perf_counter() - start)
        cache.close()
    return statistics.median(times) * 1000


def legacy_open_ms(root: Path, n: int) -> float:
    for i in range(n):
        key = f"{i:064x}"[::-1]
        path = root / key[:2] / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    times = []
    for _ in range(5):
        start = time.perf_counter()
        cache_legacy.clean_stale(root)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=2_000_000)
    parser.add_argument("--legacy-entries", type=int, default=20_000)
    parser.add_argument("--replies", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rimo-cache-bench-") as tmp:
        base = Path(tmp)
        small = base / "small"
        build_synthetic(small, 1000)
        built = build_synthetic(base / "large", args.entries)
        rows = {"open_ms_1k": open_ms(small), "open_ms_large": open_ms(base / "large"),
                "build_s": built, "entries": args.entries,
                "legacy_entries": args.legacy_entries,
                "legacy_open_ms": legacy_open_ms(base / "legacy", args.legacy_entries)}
        rows["legacy_us_per_entry"] = rows["legacy_open_ms"] * 1000 / args.legacy_entries
        rows.update(reasoning_workload(base / "reasoning", args.replies))
        rows.update(short_workload(base / "short", 3000))
        rows["replies"] = args.replies
    print(json.dumps(rows, indent=2))
    print(f"\nopen: {rows['open_ms_1k']:.2f} ms at 1,000 entries, {rows['open_ms_large']:.2f} ms "
          f"at {args.entries:,} (per-file layout: {rows['legacy_open_ms']:.1f} ms at "
          f"{args.legacy_entries:,} files, {rows['legacy_us_per_entry']:.2f} us per file)\n"
          f"reasoning replies ({args.replies}): {rows['db_bytes'] / args.replies / 1024:.1f} "
          f"KiB each on disk against {rows['per_file_bytes'] / args.replies / 1024:.1f} KiB "
          f"per file ({rows['ratio']:.0%}); put {rows['put_us']:.0f} us, get "
          f"{rows['get_us']:.0f} us; short replies: put {rows['short_put_us']:.0f} us, get "
          f"{rows['short_get_us']:.0f} us", file=sys.stderr)
    os.sync()


if __name__ == "__main__":
    main()
