"""Throughput of ``rimo-eval predict`` (openai backend) against a loopback server with latency.

The workload is RIMO itself: the 791 real items (the upstream mirror through the validate
stage), which make 1579 requests because RIMO-P sends one request per part, in order. Each row
times the whole predict process (``python -m rimo_eval predict``: imports, items, requests,
cache, parquet) on a cold response cache, against the bound
``max(requests x latency / c, longest RIMO-P chain x latency)``. In one run it prints:

* rimo-eval at c = 1 (a per-track subset: c = 1 at 200 ms would take 5 minutes), 16 and 64
  (all 1579 requests, median of ``--repeats``), peak RSS of predict at c = 64, and the warm row
  (the c = 64 run again with every reply cached: nothing is sent);
* a raw asyncio HTTP client at 64 connections: the ceiling of this server and machine;
* peers on the very same prompts as independent samples: inspect_ai 0.3.285 (``openai-api``
  provider, ``--max-connections``) and lm-eval 0.4.11 (``local-chat-completions``,
  ``num_concurrent``; ``peer_lmeval``), each installed by this script into its own venv in
  ``benchmarks/.venvs/``, never a project dependency. Independent samples are easier than
  chained RIMO-P parts.

The prompts of the reference and peer rows are the request bodies the fake server answered
during rimo-eval's c = 1 and first c = 64 runs (its ``GET /_requests`` log), so this script
does not depend on how the response cache stores entries. The server runs in its own process
so that it does not share the client's GIL. Wall-clock ratios depend on the machine's load:
the header and every row give the load average.

    .venv/bin/python benchmarks/predict_throughput.py            # everything (about 5 min)
    .venv/bin/python benchmarks/predict_throughput.py --quick    # tiny: 16 items per track, 50 ms
    .venv/bin/python benchmarks/predict_throughput.py --local 5 [--max-tokens 512]

``--quick`` (the test suite runs it) never installs a peer: a peer already installed in
``benchmarks/.venvs/`` gets its c = 64 row, one that is not is named as skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from peer_lmeval import LMEVAL_VERSION, lmeval_venv, run_lmeval  # noqa: E402
from timed import run_timed  # noqa: E402

from rimo_eval.artifacts.items import load_items  # noqa: E402
from rimo_eval.rimo.tracks import TRACK_N, TRACKS  # noqa: E402
from tests.support.chat_server import request_log  # noqa: E402

INSPECT_VERSION = "0.3.285"
VENVS = ROOT / "benchmarks" / ".venvs"
MIB = 1024 * 1024


@contextlib.contextmanager
def loopback_server(latency: float) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.chat_server",
                             "--latency", str(latency)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait()


def find_mirror() -> Path:
    candidates = [os.environ.get("RIMO_MIRROR", ""), ROOT.parent / "shared/rimo/upstream",
                  "/work/shared/rimo/upstream", ROOT / "data/raw"]
    for c in candidates:
        if c and (Path(c) / "RIMO-N.jsonl").is_file():
            return Path(c)
    raise SystemExit(f"RIMO upstream files not found in {candidates} (set RIMO_MIRROR)")


def prepare_items(work: Path) -> None:
    """data/items/ of the work folder: the real benchmark, through the real validate stage."""
    from rimo_eval.validate.stage import run as validate
    from tests.support.factories import params

    validate(params(validate={"errata": str(ROOT / "data/errata.yaml")}), raw_dir=find_mirror(),
             items_dir=work / "data/items", report_path=work / "validate_report.json")


@dataclass
class Run:
    wall_s: float
    rss_mib: float
    sent: int
    engine_s: float = 0.0  # inside the chat engine: from the first item to the last reply
    bodies: list[dict[str, Any]] = field(default_factory=list)  # as the server answered them


def write_predict_params(work: Path, base_url: str, concurrency: int, cache: str,
                         limit: int | None = None) -> None:
    """``work/params.yaml``: the project's own (the CLI validates the whole file) with an
    openai predict section against ``base_url``."""
    openai_cfg = {"base_url": base_url, "model": "bench", "api_key_env": None,
                  "cache_dir": cache, "concurrency": concurrency, "timeout_s": 60.0}
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["predict"] = {"backend": "openai", "limit": limit, "sample_seed": 0,
                         "allow_errors": 0.0, "openai": openai_cfg}
    (work / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")


def run_predict(work: Path, base_url: str, concurrency: int, cache: str,
                limit: int | None = None) -> Run:
    """One ``rimo-eval predict`` process in ``work``: its wall clock, peak RSS, and the request
    bodies the server answered while it ran (read back from the server, after it)."""
    write_predict_params(work, base_url, concurrency, cache, limit)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    mark = request_log(base_url)["next"]
    done = run_timed([sys.executable, "-m", "rimo_eval", "predict"], work, env, stderr_only=True)
    if done.returncode != 0:
        raise SystemExit(f"predict failed ({done.returncode}):\n{done.output[-3000:]}")
    # The stage's own record of the run: requests sent and the time spent predicting.
    facts = json.loads((work / "reports/predict_run.json").read_text(encoding="utf-8"))
    bodies = request_log(base_url, mark)["requests"]
    if len(bodies) != int(facts["requests_sent"]):
        raise SystemExit(f"the server answered {len(bodies)} requests, predict says it sent "
                         f"{facts['requests_sent']}")
    return Run(done.wall_s, done.rss_mib, int(facts["requests_sent"]), float(facts["wall_s"]),
               bodies)


def requests_of(work: Path, limit: int | None) -> tuple[int, int]:
    """(requests, longest chain) of a run over ``limit`` items per track."""
    from rimo_eval.predict import select_sample

    total = longest = 0
    for track in TRACKS:
        for item in select_sample(load_items(track, work / "data/items"), limit, 0):
            parts = 1 if item.track == TRACK_N else len(item.sub_problems)
            total, longest = total + parts, max(longest, parts)
    return total, longest


def stable_order(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Request bodies in an order that does not depend on the run's timing (peers send them
    as independent samples: the order of RIMO-P's chains no longer matters)."""
    return sorted(bodies, key=lambda b: json.dumps(b, sort_keys=True))


def messages_of(bodies: list[dict[str, Any]]) -> list[list[dict[str, str]]]:
    return [b["messages"] for b in bodies]


# --- reference: hand-written HTTP over asyncio streams -------------------------------------
async def _raw_worker(port: int, queue: asyncio.Queue[bytes]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while not queue.empty():
        body = queue.get_nowait()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
    writer.close()


def run_raw_reference(base_url: str, bodies: list[dict[str, Any]], concurrency: int) -> float:
    """Seconds to send every body (verbatim) on ``concurrency`` keep-alive connections."""
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])

    async def main() -> float:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        for body in bodies:
            queue.put_nowait(json.dumps(body).encode())
        started = time.perf_counter()
        await asyncio.gather(*(_raw_worker(port, queue) for _ in range(concurrency)))
        return time.perf_counter() - started

    return asyncio.run(main())


# --- peers ---------------------------------------------------------------------------------
INSPECT_TASK = '''
import json, os
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.solver import generate

ROLES = {"user": ChatMessageUser, "system": ChatMessageSystem}

@task
def rimo_prompts():
    rows = [json.loads(line) for line in open(os.environ["RIMO_BENCH_PROMPTS"])]
    samples = [Sample(id=i, input=[ROLES[m["role"]](content=m["content"]) for m in row])
               for i, row in enumerate(rows)]
    return Task(dataset=MemoryDataset(samples), solver=generate())
'''


def inspect_venv(install: bool = True) -> Path | None:
    """benchmarks/.venvs/inspect with inspect_ai installed (created on first use, if
    ``install``); None when it is not there."""
    venv = VENVS / "inspect"
    exe = venv / "bin" / "inspect"
    if not exe.exists() and not install:
        return None
    if not exe.exists():
        print(f"installing inspect-ai=={INSPECT_VERSION} into {venv} ...", file=sys.stderr)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin/pip"), "install", "-q",
                            f"inspect-ai=={INSPECT_VERSION}",
                            f"openai=={metadata.version('openai')}"], check=True)
        except subprocess.CalledProcessError as exc:
            print(f"inspect_ai could not be installed: {exc}", file=sys.stderr)
            return None
    return exe


def run_inspect(exe: Path, base_url: str, prompts: list[list[dict[str, str]]],
                connections: int, work: Path) -> Run:
    folder = Path(tempfile.mkdtemp(dir=work, prefix="inspect-"))
    (folder / "task.py").write_text(INSPECT_TASK, encoding="utf-8")
    with open(folder / "prompts.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(p) + "\n" for p in prompts)
    env = {**os.environ, "RIMO_BENCH_PROMPTS": str(folder / "prompts.jsonl"),
           "BENCH_BASE_URL": base_url, "BENCH_API_KEY": "EMPTY",
           "INSPECT_LOG_DIR": str(folder / "logs"), "HOME": str(folder)}
    env.pop("PYTHONPATH", None)
    done = run_timed([str(exe), "eval", "task.py", "--model", "openai-api/bench/bench",
                      "--max-connections", str(connections), "--display", "none"], folder, env)
    if done.returncode != 0:
        raise RuntimeError(f"inspect eval failed:\n{done.output[-2000:]}")
    return Run(done.wall_s, done.rss_mib, len(prompts))


# --- the table -----------------------------------------------------------------------------
def row(label: str, requests: int, wall: float, bound: float, extra: str = "") -> None:
    notes = f"load {os.getloadavg()[0]:.2f}" + (f"; {extra}" if extra else "")
    print(f"| {label:<44} | {requests:5d} | {wall:8.2f} s | {bound:7.2f} s | "
          f"{bound / wall:6.1%} | {notes} |", flush=True)


@dataclass
class PeerRow:
    connections: int
    bodies: list[dict[str, Any]]
    bound: float
    note: str


def run_peers(args: argparse.Namespace, base_url: str, work: Path,
              rows: list[PeerRow]) -> dict[str, dict[int, float]]:
    """Each peer's rows, on the same prompts as rimo-eval's; ``{peer: {connections: wall}}``.
    A peer that is not installed (quick mode never installs one) or cannot be installed is
    named as skipped, and the other rows still run."""
    if args.no_peers:
        print("peers: skipped (--no-peers)")
        return {}
    walls: dict[str, dict[int, float]] = {}
    why = ("not installed in benchmarks/.venvs/ (--quick never installs a peer: run the full "
           "benchmark once with PyPI reachable)" if args.quick else
           "could not be installed (see stderr)")
    exe = inspect_venv(install=not args.quick)
    if exe is None:
        print(f"peer inspect_ai {INSPECT_VERSION}: skipped, {why}")
    else:
        for r in rows:
            mark = request_log(base_url)["next"]
            got = run_inspect(exe, base_url, messages_of(r.bodies), r.connections, work)
            answered = check_answered(base_url, mark, r.bodies, "inspect_ai")
            row(f"inspect_ai {INSPECT_VERSION} max_connections {r.connections}", answered,
                got.wall_s, r.bound, f"{r.note}; RSS {got.rss_mib:.0f} MiB")
            walls.setdefault("inspect_ai", {})[r.connections] = got.wall_s
    lm_python = lmeval_venv(install=not args.quick)
    if lm_python is None:
        print(f"peer lm-eval {LMEVAL_VERSION}: skipped, {why}")
    else:
        for r in rows:
            mark = request_log(base_url)["next"]
            wall, rss, _ = run_lmeval(lm_python, base_url, messages_of(r.bodies),
                                      r.connections, work)
            answered = check_answered(base_url, mark, r.bodies, "lm-eval")
            row(f"lm-eval {LMEVAL_VERSION} num_concurrent {r.connections}", answered, wall,
                r.bound, f"{r.note}; RSS {rss:.0f} MiB")
            walls.setdefault("lm-eval", {})[r.connections] = wall
    return walls


def check_answered(base_url: str, mark: int, bodies: list[dict[str, Any]], peer: str) -> int:
    """How many requests the server answered since ``mark``: one per prompt, with the prompt's
    roles and texts (lm-eval adds ``"type": "text"`` to each message), or the peer's row would
    not be the same work as rimo-eval's."""
    def texts(messages: list[dict[str, str]]) -> str:
        return json.dumps([(m["role"], m["content"]) for m in messages])

    sent = request_log(base_url, mark)["requests"]
    got = sorted(texts(b["messages"]) for b in sent)
    if got != sorted(texts(m) for m in messages_of(bodies)):
        raise SystemExit(f"{peer} sent {len(sent)} requests whose messages are not the "
                         f"{len(bodies)} prompts it was given")
    return len(sent)


def throughput(args: argparse.Namespace) -> None:
    lat = args.latency
    scope = "all 791 items" if args.limit is None else f"{args.limit} items per track"
    with tempfile.TemporaryDirectory(prefix="rimo-bench-") as tmp, \
            loopback_server(lat) as base_url:
        work = Path(tmp)
        prepare_items(work)
        load = os.getloadavg()
        print(f"rimo-eval predict, openai backend, loopback server {base_url}, "
              f"latency {lat * 1000:.0f} ms; {time.strftime('%Y-%m-%d %H:%M %Z')}; "
              f"{os.cpu_count()} cores, load average {load[0]:.2f} / {load[1]:.2f} / "
              f"{load[2]:.2f}" + ("; --quick" if args.quick else ""))
        print("bound = max(requests x latency / c, longest RIMO-P chain x latency); "
              "wall = the whole predict process, cold cache; load: 1-minute load average "
              "after the row\n")
        print(f"| {'run':<44} | req   | wall       | bound     | ratio  | notes |")
        print(f"|{'-' * 46}|-------|------------|-----------|--------|-------|")
        run_predict(work, base_url, 8, "cache-warmup", limit=2)  # page cache, server threads

        c1_req, _ = requests_of(work, args.c1_limit)
        c1 = run_predict(work, base_url, 1, "cache-c1", limit=args.c1_limit)
        row(f"rimo-eval c=1 ({args.c1_limit} items per track)", c1.sent, c1.wall_s,
            c1_req * lat, f"engine {c1.engine_s:.1f} s")
        requests, chain = requests_of(work, args.limit)
        c16 = run_predict(work, base_url, 16, "cache-c16", limit=args.limit)
        row(f"rimo-eval c=16 ({scope})", c16.sent, c16.wall_s,
            max(requests * lat / 16, chain * lat), f"engine {c16.engine_s:.1f} s")
        runs = [run_predict(work, base_url, 64, f"cache-c64-{i}", limit=args.limit)
                for i in range(args.repeats)]
        c64 = statistics.median(r.wall_s for r in runs)
        bound64 = max(requests * lat / 64, chain * lat)
        spread = ", ".join(f"{r.wall_s:.2f}" for r in runs)
        row(f"rimo-eval c=64 ({scope}) HEADLINE", runs[0].sent, c64, bound64,
            f"median of {len(runs)}: {spread} s; engine "
            f"{statistics.median(r.engine_s for r in runs):.1f} s")
        warm = run_predict(work, base_url, 64, "cache-c64-0", limit=args.limit)
        if warm.sent != 0:
            raise SystemExit(f"the warm run sent {warm.sent} requests; every reply was cached")
        print(f"| {'warm: c=64 again, every reply cached':<44} | {0:5d} | {warm.wall_s:8.2f} s "
              f"|         - |      - | load {os.getloadavg()[0]:.2f}; goal < 2 s |")
        # The bodies c = 64 sent, as the server answered them: the reference and the peers
        # send exactly these, as independent requests.
        bodies, c1_bodies = stable_order(runs[0].bodies), stable_order(c1.bodies)
        if (len(bodies), len(c1_bodies)) != (requests, c1_req):
            raise SystemExit(f"the server answered {len(bodies)} and {len(c1_bodies)} requests "
                             f"of the c=64 and c=1 runs; expected {requests} and {c1_req}")
        raw = run_raw_reference(base_url, bodies, 64)
        raw_bound = len(bodies) * lat / 64
        row("reference: raw asyncio HTTP, 64 conns", len(bodies), raw, raw_bound,
            "independent requests, no client library")

        peer_rows = [PeerRow(64, bodies, raw_bound, "independent samples")]
        if not args.quick:
            peer_rows.insert(0, PeerRow(1, c1_bodies, c1_req * lat, "same c=1 prompts"))
        peers = run_peers(args, base_url, work, peer_rows)
        print()
        peak = max(r.rss_mib for r in runs)
        print(f"peak RSS of predict at c=64: {peak:.0f} MiB (goal < 400 MiB)")
        print(f"c=64: {bound64 / c64:.1%} of the bound (goal >= 90%); warm run {warm.wall_s:.2f}"
              f" s (goal < 2 s); rimo-eval c=64 / raw reference wall time {c64 / raw:.2f}x")
        for name, w in peers.items():
            ratios = ([f"c=1 {w[1] / c1.wall_s:.2f}x"] if 1 in w else []) + \
                [f"c=64 {w[64] / c64:.2f}x"]
            print(f"{name} / rimo-eval wall time: {', '.join(ratios)} "
                  "(goals: >= 1x at c=1, >= 4x at c=64)")
        if peers:
            fastest = min(peers, key=lambda name: peers[name][64])
            print(f"fastest peer at c=64: {fastest}, {peers[fastest][64] / c64:.2f}x rimo-eval's "
                  "wall time")
        load = os.getloadavg()
        print(f"load average at the end: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


# --- the local backend ---------------------------------------------------------------------
def mirror_rimo_n(count: int) -> list[Any]:
    from rimo_eval.artifacts.items import Item

    path = find_mirror() / "RIMO-N.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:count]]
    return [Item(TRACK_N, str(r["problem_id"]), r["problem"], r.get("type"), 1, True,
                 f"h{r['problem_id']}", answer=str(r["answer"])) for r in rows]


def run_local(count: int, max_tokens: int) -> None:
    from rimo_eval.chat.transport import ChatReply
    from rimo_eval.params.chat import LocalParams
    from rimo_eval.predictors.local_model import LocalModelPredictor

    items = mirror_rimo_n(count)
    with tempfile.TemporaryDirectory() as cache:  # cold caches; the GGUF is reassembled here
        predictor = LocalModelPredictor(LocalParams(max_tokens=max_tokens, cache_dir=cache,
                                                    model_cache_dir=cache))
        transport = predictor.make_transport()
        predictor.make_transport = lambda: transport  # keep a handle on the load time
        # Latency is not in the predictions (they must be byte-identical between runs): each
        # reply carries it on its way to the cache, so it is taken there.
        latencies: list[float] = []
        send = transport.send

        async def timed_send(request: dict[str, Any]) -> ChatReply:
            reply = await send(request)
            latencies.append(reply.latency_s)
            return reply

        transport.send = timed_send  # type: ignore[method-assign]
        started = time.perf_counter()
        preds = predictor.predict(items)
        elapsed = time.perf_counter() - started
        busy = sum(latencies)
    gen = sum(p.details["usage"]["completion_tokens"] for p in preds)
    prompt = sum(p.details["usage"]["prompt_tokens"] for p in preds)
    print(f"local backend, {count} real RIMO-N items, max_tokens {max_tokens}, "
          f"n_threads={transport.n_threads}, load avg {os.getloadavg()[0]:.2f}")
    print(f"  model load {transport.load_s:.2f}s; {elapsed:.1f}s in all, "
          f"{elapsed / count:.1f}s per item")
    print(f"  {prompt} prompt + {gen} generated tokens; {(prompt + gen) / busy:.0f} tokens/s "
          f"processed, {gen / busy:.1f} generated tokens/s (prompt time included)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=3, help="c=64 runs (median)")
    parser.add_argument("--c1-limit", type=int, default=20,
                        help="items per track at c=1 (null: all; 5+ minutes at 200 ms)")
    parser.add_argument("--limit", type=int, default=None,
                        help="items per track at c=16 and c=64 (default: all)")
    parser.add_argument("--no-peers", action="store_true", help="skip inspect_ai and lm-eval")
    parser.add_argument("--quick", action="store_true",
                        help="tiny: 50 ms latency, 16 items per track (3 at c=1), one c=64 run, "
                        "peers only if installed, at c=64")
    parser.add_argument("--local", type=int, metavar="K", help="time the local model instead")
    parser.add_argument("--max-tokens", type=int, default=512, help="for --local")
    args = parser.parse_args(argv)
    if args.local:
        run_local(args.local, args.max_tokens)
        return
    if args.quick:
        args.latency, args.limit, args.c1_limit, args.repeats = 0.05, 16, 3, 1
    throughput(args)


if __name__ == "__main__":
    main()
