"""Several predicts on one response cache (issue 30 §1): duplicate requests, wall time, tables,
and what a ``kill -9`` or a SIGSTOP of one worker costs the others.

Each scenario starts one fake server (``tests/support/chat_server.py``, in this process: it
counts every request it answers, per body) with a fixed latency, then:

* the reference: one ``python -m rimo_eval predict`` alone on a fresh cache;
* N workers started together, each in its own folder (as N ``dvc queue`` workers in N clones)
  with the same params and one shared ``cache_dir``, fresh; optionally one of them is killed
  (``kill -9``) or stopped (SIGSTOP for ``LEASE_S`` + 3 s, then SIGCONT) once the server has
  answered a third of the requests.

Reported per scenario: distinct requests, requests answered, duplicates (answered - distinct:
the requests paid twice; at k > 1 the k samples of a prompt have one body, so that row's
duplicates are the samples, not waste), each worker's wall time against the reference's, the
client CPU per request (user + system of the whole process, from ``wait4``), and whether
every finished worker's predictions tables are byte for byte the reference's. A fault's cost
is the survivor's wall time against the same workers with no fault. The last scenario is one
worker at k = 16 (25,264 requests): its CPU per request is the tracked client figure (0.372
ms in ``scale_memory.py``). ``--baseline REV`` runs the two-worker scenarios and that one
again with the code of REV (default: main before issue 30, whose single flight stopped at
the process) for the side-by-side. The real RIMO items, through the validate stage
(``RIMO_MIRROR`` or ``../shared/rimo/upstream``).

    .venv/bin/python benchmarks/cache_workers.py            # every scenario, about 5 min
    .venv/bin/python benchmarks/cache_workers.py --quick    # 10 items per track, 2 scenarios
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import old_tree  # noqa: E402
from predict_throughput import prepare_items  # noqa: E402

from rimo_eval.chat.leases import LEASE_S  # noqa: E402
from tests.support.chat_server import ChatServer  # noqa: E402

BASELINE = "ec772a7"  # main before issue 30: single flight inside one process only


@dataclass
class Scenario:
    name: str
    workers: int
    latency: float
    concurrency: int
    limit: int | None
    fault: str | None = None  # "kill" or "stop" (worker 0)
    baseline: bool = False  # also run it with the baseline code
    samples: int = 1


@dataclass
class Worker:
    folder: Path
    proc: subprocess.Popen[bytes]
    started: float
    wall_s: float = 0.0
    cpu_s: float = 0.0
    returncode: int | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def wait_in_thread(self) -> None:
        def reap() -> None:
            _, status, usage = os.wait4(self.proc.pid, 0)
            self.wall_s = time.perf_counter() - self.started
            self.cpu_s = usage.ru_utime + usage.ru_stime
            self.returncode = self.proc.returncode = os.waitstatus_to_exitcode(status)
            self.done.set()
        threading.Thread(target=reap, daemon=True).start()


@dataclass
class Code:
    """Where the ``stages`` package and its params.yaml come from."""
    label: str
    root: Path
    params: dict[str, Any]


def current_code() -> Code:
    return Code("now", ROOT, yaml.safe_load((ROOT / "params.yaml").read_text("utf-8")))


def baseline_code(rev: str, into: Path) -> Code | None:
    if old_tree.extract(ROOT, rev, into) is None:
        return None
    params = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:params.yaml"],
                            capture_output=True, text=True, check=True).stdout
    return Code(f"baseline {rev}", into, yaml.safe_load(params))


def folder(base: Path, name: str, items: Path, code: Code, base_url: str, cache: Path,
           s: Scenario) -> Path:
    work = base / name
    (work / "data").mkdir(parents=True)
    (work / "data" / "items").symlink_to(items)
    params = json.loads(json.dumps(code.params))
    params["predict"] = {"backend": "openai", "limit": s.limit, "sample_seed": 0,
                         "samples": s.samples,
                         "allow_errors": 0.0, "openai": {
                             "base_url": base_url, "model": "bench", "api_key_env": None,
                             "cache_dir": str(cache), "concurrency": s.concurrency,
                             "timeout_s": 60.0}}
    (work / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    return work


def start(work: Path, code: Code) -> Worker:
    env = {**os.environ, "PYTHONPATH": str(code.root), "TQDM_DISABLE": "1"}
    log = open(work / "predict.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([sys.executable, "-m", old_tree.package(code.root), "predict"],
                            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    worker = Worker(work, proc, time.perf_counter())
    worker.wait_in_thread()
    return worker


def log_tail(worker: Worker) -> str:
    return (worker.folder / "predict.log").read_text(errors="replace")[-3000:]


def tables(work: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((work / "data/predictions").glob("*"))}


def answered(server: ChatServer) -> tuple[int, int]:
    counts = server.answered()
    return len(counts), sum(counts.values())


@dataclass
class Reference:
    """One predict alone on a fresh cache: what the workers' tables must equal."""
    wall_s: float
    cpu_ms_per_request: float
    distinct: int
    tables: dict[str, bytes]


def reference(s: Scenario, code: Code, items: Path, base: Path, server: ChatServer,
              tag: str, refs: dict[tuple[Any, ...], Reference]) -> Reference:
    """Measured once per code and server settings (scenarios that differ only by their
    fault share it: a run less, which keeps ``--quick`` short)."""
    key = (code.label, server.base_url, s.concurrency, s.limit, s.samples)
    if key not in refs:
        ref = start(folder(base, f"{tag}-ref", items, code, server.base_url,
                           base / f"{tag}-ref-cache", s), code)
        ref.done.wait()
        if ref.returncode != 0:
            raise SystemExit(f"reference predict failed:\n{log_tail(ref)}")
        distinct, sent = answered(server)  # k samples of one prompt: one body, k requests
        refs[key] = Reference(ref.wall_s, ref.cpu_s * 1000 / max(1, sent), distinct,
                              tables(ref.folder))
        server.reset()
    return refs[key]


def run(s: Scenario, code: Code, items: Path, base: Path, server: ChatServer,
        refs: dict[tuple[Any, ...], Reference]) -> dict[str, Any]:
    """``server``: one per latency for the whole run, so that a reference (its tables name the
    server's address through the request keys) serves every scenario on it."""
    tag = f"{s.name}-{code.label}".replace(" ", "_").replace("/", "_")
    server.reset()  # (the previous scenario's requests)
    ref = reference(s, code, items, base, server, tag, refs)
    distinct, expected = ref.distinct, ref.tables
    cache = base / f"{tag}-cache"
    works = [folder(base, f"{tag}-w{i}", items, code, server.base_url, cache, s)
             for i in range(s.workers)]
    workers = [start(w, code) for w in works]
    fault_at = None
    if s.fault:
        while answered(server)[0] < distinct // 3 and not workers[0].done.is_set():
            time.sleep(0.005)
        fault_at = time.perf_counter() - workers[0].started
        if s.fault == "kill":
            os.kill(workers[0].proc.pid, signal.SIGKILL)
        else:
            os.kill(workers[0].proc.pid, signal.SIGSTOP)
            time.sleep(LEASE_S + 3)
            os.kill(workers[0].proc.pid, signal.SIGCONT)
    for w in workers:
        w.done.wait()
    finished = [w for w in workers if w.returncode == 0]
    failed = [w for w in workers if w.returncode != 0 and not (s.fault == "kill"
                                                                and w is workers[0])]
    if failed:
        raise SystemExit(f"a worker failed:\n{log_tail(failed[0])}")
    got_distinct, total = answered(server)
    return {"scenario": s.name, "code": code.label, "workers": s.workers,
            "samples": s.samples,
            "latency_s": s.latency, "concurrency": s.concurrency, "limit": s.limit,
            "fault": s.fault, "fault_at_s": fault_at, "distinct": distinct,
            "distinct_now": got_distinct, "answered": total,
            "duplicates": total - got_distinct,
            "duplicate_share": (total - got_distinct) / max(1, got_distinct),
            "ref_wall_s": ref.wall_s, "walls_s": [w.wall_s for w in workers],
            "ref_cpu_ms_per_request": ref.cpu_ms_per_request,
            "tables_identical": all(tables(w.folder) == expected for w in finished),
            "finished": len(finished)}


def scenarios(quick: bool) -> list[Scenario]:
    if quick:
        return [Scenario("2 workers", 2, 0.05, 8, 10),
                Scenario("2 workers, kill -9 of one", 2, 0.05, 8, 10, "kill")]
    return [Scenario("2 workers", 2, 0.1, 16, 200, baseline=True),
            Scenario("4 workers", 4, 0.1, 16, 200),
            Scenario("2 workers, all items", 2, 0.0, 64, None, baseline=True),
            Scenario("4 workers, all items", 4, 0.0, 64, None),
            Scenario("2 workers, kill -9 of one", 2, 0.1, 16, 200, "kill"),
            Scenario("2 workers, SIGSTOP of one", 2, 0.1, 16, 200, "stop"),
            # The client CPU per request at k = 16 (25,264 requests), the tracked figure.
            Scenario("1 worker, k = 16", 1, 0.0, 64, None, baseline=True, samples=16)]


def same_without_fault(row: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    key = ("workers", "latency_s", "concurrency", "limit", "code", "samples")
    return next((r for r in rows if not r["fault"] and all(r[k] == row[k] for k in key)), None)


def show(row: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    walls = ", ".join(f"{w:.2f}" for w in row["walls_s"])
    extra = ""
    if row["fault"]:
        survivor = row["walls_s"][1]
        plain = same_without_fault(row, rows)
        against = "" if plain is None else (
            f", {survivor - max(plain['walls_s']):+.2f} s against the same two workers with "
            f"no {row['fault']}")
        extra = (f"; {row['fault']} of worker 0 at {row['fault_at_s']:.1f} s: the other took "
                 f"{survivor - row['ref_wall_s']:+.2f} s against one worker alone{against}")
    return (f"| {row['scenario']} | {row['code']} | {row['latency_s'] * 1000:.0f} ms, "
            f"c = {row['concurrency']} | {row['distinct']} | {row['answered']} | "
            f"{row['duplicates']} ({row['duplicate_share']:.1%}) | {row['ref_wall_s']:.2f} s | "
            f"{walls} s | {row['ref_cpu_ms_per_request']:.3f} ms | "
            f"{'yes' if row['tables_identical'] else 'NO'} |{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 items per track, 2 rows")
    parser.add_argument("--baseline", default=BASELINE,
                        help=f"git revision of today's code for the side-by-side "
                             f"(default {BASELINE}); 'none' skips it")
    args = parser.parse_args()
    print(f"load average: {Path('/proc/loadavg').read_text().strip()}", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rimo-workers-bench-") as tmp:
        base = Path(tmp)
        prepare_items(base / "items-src")
        items = base / "items-src" / "data" / "items"
        codes = [current_code()]
        refs: dict[tuple[Any, ...], Reference] = {}
        old = None if args.quick or args.baseline == "none" else baseline_code(
            args.baseline, base / "baseline")
        servers: dict[float, ChatServer] = {}
        try:
            for s in scenarios(args.quick):
                if s.latency not in servers:
                    servers[s.latency] = ChatServer(latency_s=s.latency).start()
                for code in codes + ([old] if old is not None and s.baseline else []):
                    row = run(s, code, items, base, servers[s.latency], refs)
                    rows.append(row)
                    print(show(row, rows), file=sys.stderr, flush=True)
        finally:
            for server in servers.values():
                server.stop()
    print(json.dumps(rows, indent=2))
    print(f"load average at the end: {Path('/proc/loadavg').read_text().strip()}",
          file=sys.stderr)
    print("| scenario | code | server | distinct | answered | duplicates | one worker alone |"
          " each worker | CPU per request (alone) | tables identical |", file=sys.stderr)
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |", file=sys.stderr)
    for row in rows:
        print(show(row, rows), file=sys.stderr)


if __name__ == "__main__":
    main()
