"""Peak RSS and wall time of each stage at growing k (issue 20), with and without reasoning text.

The workload is RIMO itself (791 items, 1579 requests per sample) at ``predict.samples`` = k
against the loopback fake server (its own process, zero latency), whose every reply carries
``--reasoning-bytes`` of reasoning and ``--answer-bytes`` of answer
(``tests/support/chat_server.py``'s reply-size option; 0 and 0: the short replies). Each k runs
in a fresh copy of the project (``tests.support.pipeline_repo.make_repo``, a real git + DVC
repo, fetch from the local mirror) with a cold response cache: fetch and validate, then
predict, score, judge, report, each as its own ``python -m rimo_eval`` process (peak RSS from
``wait4``: the process and the children it waited for, so the report's Jupyter kernel counts),
then ``dvc commit`` to record the lock and ``rimo-eval audit`` the same way; then the run is
committed and ``compare``, ``leaderboard`` and ``view`` read it at two revisions (HEAD and the
workspace: two runs of the same size).

    .venv/bin/python benchmarks/scale_memory.py --k 1 4   # 32 KB reasoning + 2 KB answer
    .venv/bin/python benchmarks/scale_memory.py --k 1 --reasoning-bytes 0 --answer-bytes 0
    .venv/bin/python benchmarks/scale_memory.py --quick   # k = 1, 3 items, 2 KB replies, compare

The full goal (k = 64 with reasoning: 101,056 requests, 3.4 GB of text) needs about an hour of
this machine and more memory than today's code has; run the sizes that finish, and read the
per-request slope off the rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from predict_throughput import find_mirror  # noqa: E402
from timed import run_timed  # noqa: E402

from tests.support.pipeline_repo import env as repo_env  # noqa: E402
from tests.support.pipeline_repo import make_repo, sh  # noqa: E402

STAGES = ("predict", "score", "judge", "report", "audit")  # judge: disabled, as by default
TOOLS = ("compare", "leaderboard", "view")  # over two runs: HEAD and the workspace


@contextlib.contextmanager
def server(reasoning: int, answer: int) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.chat_server",
                             "--reasoning-bytes", str(reasoning), "--answer-bytes", str(answer)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait()


def one_k(work: Path, base_url: str, k: int, concurrency: int, limit: int | None = None,
          tools: tuple[str, ...] = TOOLS) -> dict[str, dict[str, float]]:
    defaults = yaml.safe_load((ROOT / "params.yaml").read_text())["predict"]["openai"]
    repo = make_repo(work / f"k{k}", find_mirror(), predict={
        "backend": "openai", "limit": limit, "samples": k,
        "openai": {**defaults, "base_url": base_url, "model": "bench", "api_key_env": None,
                   "cache_dir": str(work / f"cache-k{k}"), "concurrency": concurrency,
                   "timeout_s": 120.0}})
    env = {**repo_env(), "TQDM_DISABLE": "1",
           "RIMO_EVAL_KATEX_DIR": str(ROOT / "node_modules/katex/dist")}
    rows: dict[str, dict[str, float]] = {}
    sh(repo, sys.executable, "-m", "rimo_eval", "check-params")  # fetch's dep; not measured
    for stage in ("fetch", "validate", *STAGES[:-1]):
        done = run_timed([sys.executable, "-m", "rimo_eval", stage], repo, env, stderr_only=True)
        if done.returncode != 0:
            raise SystemExit(f"k={k} {stage} failed ({done.returncode}):\n{done.output[-3000:]}")
        rows[stage] = {"wall_s": round(done.wall_s, 1), "rss_mib": round(done.rss_mib),
                       "cpu_s": round(done.cpu_s, 1)}
    # The lock of what just ran, for the audit: these stages only (view is not built here).
    sh(repo, "dvc", "commit", "-f", "-q", "check-params", "fetch", "validate", *STAGES[:-1])
    done = run_timed([sys.executable, "-m", "rimo_eval", "audit"], repo, env, stderr_only=True)
    rows["audit"] = {"wall_s": round(done.wall_s, 1), "rss_mib": round(done.rss_mib),
                     "exit": done.returncode}
    # Two runs for the commands that read several: the run committed (HEAD) and the workspace,
    # the same files at two revisions, read through DVC as any two runs are.
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", f"k={k} run")
    for name, args in (("compare", ["HEAD", "workspace"]), ("leaderboard", ["HEAD", "workspace"]),
                       ("view", ["HEAD", "workspace", "--out", str(work / f"view-k{k}")])):
        if name not in tools:
            continue
        done = run_timed([sys.executable, "-m", "rimo_eval", name, *args], repo, env,
                         stderr_only=True)
        if done.returncode != 0:
            raise SystemExit(f"k={k} {name} failed ({done.returncode}):\n{done.output[-3000:]}")
        rows[name] = {"wall_s": round(done.wall_s, 1), "rss_mib": round(done.rss_mib)}
    shutil.rmtree(work / f"view-k{k}", ignore_errors=True)
    facts = json.loads((repo / "reports/predict_run.json").read_text())
    rows["predict"]["requests"] = int(facts["requests_sent"])
    # The client's CPU per request, the whole process (start-up, tables) included.
    rows["predict"]["cpu_ms_per_request"] = round(
        1000 * rows["predict"]["cpu_s"] / max(1, rows["predict"]["requests"]), 3)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--reasoning-bytes", type=int, default=32768)
    parser.add_argument("--answer-bytes", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--limit", type=int, default=None, help="items per track (default: all)")
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS),
                        help="the commands timed over two runs (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny: k = 1, 3 items per track, 2 KB reasoning + 256 B answer, "
                        "compare alone (leaderboard_scale.py and view_build.py run the others)")
    args = parser.parse_args()
    if args.quick:
        args.k, args.limit, args.reasoning_bytes, args.answer_bytes = [1], 3, 2048, 256
        args.tools = ["compare"]
    load_start = [round(x, 2) for x in os.getloadavg()]
    print(f"load average {load_start[0]:.2f}, {os.cpu_count()} cores; replies "
          f"{args.reasoning_bytes} B reasoning + {args.answer_bytes} B answer", file=sys.stderr)
    results = {}
    with tempfile.TemporaryDirectory(prefix="rimo-scale-") as tmp, \
            server(args.reasoning_bytes, args.answer_bytes) as base_url:
        for k in args.k:
            results[k] = one_k(Path(tmp), base_url, k, args.concurrency, args.limit,
                               tuple(args.tools))
            row = results[k]
            print(f"k={k}: {row['predict']['requests']} requests; " + "; ".join(
                f"{s} {row[s]['wall_s']} s, {row[s]['rss_mib']} MiB"
                for s in (*STAGES, *args.tools))
                + ("" if row["audit"]["exit"] == 0 else f" (audit exit {row['audit']['exit']})"),
                file=sys.stderr, flush=True)
    print(json.dumps({"reasoning_bytes": args.reasoning_bytes,
                      "answer_bytes": args.answer_bytes, "limit": args.limit,
                      "loadavg_start": load_start,
                      "loadavg_end": [round(x, 2) for x in os.getloadavg()],
                      "by_k": results}, indent=2))


if __name__ == "__main__":
    main()
