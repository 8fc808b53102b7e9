"""Throughput of the openai backend against the loopback server with injected latency.

791 synthetic single-request items (the size of RIMO-N + RIMO-P) at concurrency 1, 16 and 64,
each run on a cold response cache, compared with the bound ``N x latency / concurrency``; and
the upstream scripts' pattern (a sequential loop sleeping 0.25 s between requests) for scale.
Concurrency 1 and the sequential loop would take minutes on all 791 items, so they run on a
subset and are extrapolated linearly (each request costs the same); the output says so.
``--mixed`` adds one run shaped like the real benchmark: 335 one-call RIMO-N items plus 456
RIMO-P items of 1-4 sequential parts (the real distribution: 47/140/159/110).
``--local K`` instead times the local backend (Gemma 3 270M, in-process) on the first K real
RIMO-N problems of the upstream mirror: load time, prompt and generation tokens/s, s/item.

The server runs in its own process so that it does not share the client's GIL.

    .venv/bin/python benchmarks/predict_throughput.py [--latency 0.2] [--mixed]
    .venv/bin/python benchmarks/predict_throughput.py --local 5 [--max-tokens 512]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm is imported: bars would mangle the table

import openai

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stages.core.items import Item  # noqa: E402
from stages.core.tracks import TRACK_N, TRACK_P  # noqa: E402
from stages.predictors.chat_engine import calls_needed  # noqa: E402
from stages.predictors.openai_chat import OpenAIPredictor  # noqa: E402

N_ITEMS = 791
PARTS = {1: 47, 2: 140, 3: 159, 4: 110}  # RIMO-P items by number of parts


@contextlib.contextmanager
def loopback_server(latency: float) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "chat_server.py"),
                             "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait()


def synthetic_items(count: int) -> list[Item]:
    return [Item(TRACK_N, f"b{i}", f"Benchmark problem {i}. [[gold:{i}]]", "algebra", 1, True,
                 f"h{i}", answer=str(i)) for i in range(count)]


def mixed_items() -> list[Item]:
    items = synthetic_items(335)
    for parts, count in PARTS.items():
        for j in range(count):
            subs = tuple(f"Part {k + 1} of mixed problem {parts}-{j}." for k in range(parts))
            items.append(Item(TRACK_P, f"p{parts}-{j}", f"Mixed problem {parts}-{j}.",
                              "algebra", parts, True, f"hp{parts}-{j}", sub_problems=subs))
    return items


def run_backend(base_url: str, items: list[Item], concurrency: int) -> float:
    with tempfile.TemporaryDirectory() as cache:  # cold cache: every request is sent
        config = {"base_url": base_url, "model": "bench", "api_key_env": None,
                  "cache_dir": cache, "concurrency": concurrency, "timeout_s": 30.0}
        started = time.perf_counter()
        preds = OpenAIPredictor(config).predict(items)
        elapsed = time.perf_counter() - started
    failed = [p for p in preds if p.status != "ok"]
    assert not failed, failed[:3]
    return elapsed


async def _raw_worker(port: int, queue: asyncio.Queue[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while not queue.empty():
        i = queue.get_nowait()
        body = json.dumps({"model": "bench",
                           "messages": [{"role": "user", "content": f"raw {i} [[gold:{i}]]"}]})
        writer.write(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     f"application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
    writer.close()


def run_raw_reference(base_url: str, count: int, concurrency: int) -> float:
    """Hand-written HTTP over asyncio streams: the ceiling this server and machine allow."""
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])

    async def main() -> float:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(count):
            queue.put_nowait(i)
        started = time.perf_counter()
        await asyncio.gather(*(_raw_worker(port, queue) for _ in range(concurrency)))
        return time.perf_counter() - started

    return asyncio.run(main())


def run_upstream_loop(base_url: str, items: list[Item], pause: float) -> float:
    """What the upstream scripts do: one request at a time, then sleep."""
    client = openai.OpenAI(base_url=base_url, api_key="EMPTY")
    started = time.perf_counter()
    for item in items:
        client.chat.completions.create(model="bench", temperature=0.0,
                                       messages=[{"role": "user", "content": item.problem}])
        time.sleep(pause)
    return time.perf_counter() - started


def report(label: str, measured_items: int, elapsed: float, concurrency: int,
           latency: float, total: int = N_ITEMS, requests_per_item: float = 1.0,
           bound_s: float | None = None) -> None:
    extrapolated = elapsed * total / measured_items
    bound = bound_s if bound_s is not None else total * requests_per_item * latency / concurrency
    note = (f"  (measured {measured_items} items in {elapsed:.2f}s, extrapolated to {total})"
            if measured_items != total else "")
    print(f"{label:<34} {extrapolated:8.2f}s {total / extrapolated:8.1f} items/s   "
          f"bound {bound:7.2f}s   ratio {bound / extrapolated:6.1%}{note}")


def mirror_rimo_n(count: int) -> list[Item]:
    candidates = [os.environ.get("RIMO_MIRROR", ""), ROOT.parent / "shared/rimo/upstream",
                  "/work/shared/rimo/upstream"]
    path = next(Path(c) / "RIMO-N.jsonl" for c in candidates
                if c and (Path(c) / "RIMO-N.jsonl").is_file())
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:count]]
    return [Item(TRACK_N, str(r["problem_id"]), r["problem"], r.get("type"), 1, True,
                 f"h{r['problem_id']}", answer=str(r["answer"])) for r in rows]


def run_local(count: int, max_tokens: int) -> None:
    from stages.predictors.local_model import LocalModelPredictor

    items = mirror_rimo_n(count)
    with tempfile.TemporaryDirectory() as cache:  # cold caches; the GGUF is reassembled here
        predictor = LocalModelPredictor({"max_tokens": max_tokens, "cache_dir": cache,
                                         "model_cache_dir": cache})
        transport = predictor.make_transport()
        predictor.make_transport = lambda: transport  # keep a handle on the load time
        started = time.perf_counter()
        preds = predictor.predict(items)
        elapsed = time.perf_counter() - started
    gen = sum(p.details["usage"]["completion_tokens"] for p in preds)
    prompt = sum(p.details["usage"]["prompt_tokens"] for p in preds)
    busy = sum(p.details["latency_s"] for p in preds)
    print(f"local backend, {count} real RIMO-N items, max_tokens {max_tokens}, "
          f"n_threads={transport.n_threads}, load avg {os.getloadavg()[0]:.2f}")
    print(f"  model load {transport.load_s:.2f}s; {elapsed:.1f}s in all, "
          f"{elapsed / count:.1f}s per item")
    print(f"  {prompt} prompt + {gen} generated tokens; {(prompt + gen) / busy:.0f} tokens/s "
          f"processed, {gen / busy:.1f} generated tokens/s (prompt time included)")
    print(f"  finish reasons {[p.details['finish_reason'] for p in preds]}, "
          f"extraction {[p.details['extraction'] for p in preds]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--subset", type=int, default=50,
                        help="items measured at concurrency 1 and in the sequential loop")
    parser.add_argument("--pause", type=float, default=0.25, help="upstream loop's sleep")
    parser.add_argument("--mixed", action="store_true", help="add a RIMO-shaped run")
    parser.add_argument("--local", type=int, metavar="K", help="time the local model instead")
    parser.add_argument("--max-tokens", type=int, default=512, help="for --local")
    args = parser.parse_args(argv)
    if args.local:
        run_local(args.local, args.max_tokens)
        return

    with loopback_server(args.latency) as base_url:
        print(f"loopback server {base_url}, latency {args.latency * 1000:.0f} ms, "
              f"{os.cpu_count()} cores; bound = N x latency / concurrency")
        subset = synthetic_items(args.subset)
        run_backend(base_url, subset[:8], 8)  # warm-up: imports, connections
        report("backend  concurrency 1", args.subset, run_backend(base_url, subset, 1), 1,
               args.latency)
        for concurrency in (16, 64):
            elapsed = run_backend(base_url, synthetic_items(N_ITEMS), concurrency)
            report(f"backend  concurrency {concurrency}", N_ITEMS, elapsed, concurrency,
                   args.latency)
        elapsed = run_raw_reference(base_url, N_ITEMS, 64)
        report("reference: raw asyncio HTTP, c=64", N_ITEMS, elapsed, 64, args.latency)
        elapsed = run_upstream_loop(base_url, subset, args.pause)
        report(f"upstream loop, sleep {args.pause}s", args.subset, elapsed, 1, args.latency)
        if args.mixed:
            items = mixed_items()
            requests = calls_needed(items)
            bound = max(requests * args.latency / 64, max(PARTS) * args.latency)
            elapsed = run_backend(base_url, items, 64)
            report(f"backend  c=64, RIMO-shaped ({requests} req)", len(items), elapsed, 64,
                   args.latency, total=len(items), bound_s=bound)


if __name__ == "__main__":
    main()
