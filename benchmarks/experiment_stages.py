"""A 5-item experiment with a no-model backend: `dvc exp run`'s wall time beside the time of
each stage's own command in the same run (issue 43, Performance).

A fresh copy of the project (backend constant, limit 5) runs `dvc repro` once; then each round
is `dvc exp run -S predict.constant.answer="<n>"`, which reruns check-params, predict, score,
judge, view and report (fetch and validate are up to date). A `rimo-eval` shim first on PATH
records the wall time of every stage command DVC starts, so the stages' sum and DVC's own share
come from the same run. The machine is shared: the load average is printed before and after,
and the table gives every round and their median.

    python benchmarks/experiment_stages.py [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from predict_throughput import find_mirror  # noqa: E402
from timed import Timed, run_timed  # noqa: E402

from tests.support.pipeline_repo import BIN, env, make_repo, sh  # noqa: E402

STAGES = ("check-params", "predict", "score", "judge", "view", "report")
# Wall clock and CPU (user + system, the stage's children included) of each stage command.
SHIM = """#!/bin/bash
exec /usr/bin/time -a -o "{log}" -f "$1 %e %U %S" "{real}" "$@"
"""


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


Round = tuple[Timed, dict[str, float], dict[str, float]]  # dvc exp run; stage wall; stage CPU


def one_round(repo: Path, shim_env: dict[str, str], log: Path, answer: int) -> Round:
    log.write_text("")
    run = run_timed(["dvc", "exp", "run", "-S", f'predict.constant.answer="{answer}"'], repo,
                    shim_env)
    if run.returncode != 0:
        raise SystemExit(f"dvc exp run failed:\n{run.output[-3000:]}")
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for line in log.read_text().splitlines():
        name, real, user, system = line.split()[-4:]
        wall[name] = wall.get(name, 0.0) + float(real)
        cpu[name] = cpu.get(name, 0.0) + float(user) + float(system)
    return run, wall, cpu


def table(rows: list[Round], which: int, unit: str) -> None:
    """One table: wall clock (which=1) or CPU (which=2), each round and the median."""
    med = statistics.median
    total = [r[0].wall_s if which == 1 else r[0].cpu_s for r in rows]
    sums = [sum(r[which].values()) for r in rows]
    print(f"| {unit} | dvc exp run | stages' sum | DVC's own | " + " | ".join(STAGES) + " |")
    print("|" + " --- |" * (4 + len(STAGES)))
    for index, (t, s, r) in enumerate(zip(total, sums, rows, strict=True), 1):
        print(f"| {index} | {t:.2f} s | {s:.2f} s | {t - s:.2f} s | "
              + " | ".join(f"{r[which].get(x, 0):.2f}" for x in STAGES) + " |")
    print(f"| median of {len(rows)} | {med(total):.2f} s | {med(sums):.2f} s | "
          f"{med(t - s for t, s in zip(total, sums, strict=True)):.2f} s | "
          + " | ".join(f"{med(r[which].get(x, 0) for r in rows):.2f}" for x in STAGES) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="one round, after `dvc repro validate` only (the round runs the "
                             "same six stages): a smoke test of the script, in tests/benchmarks")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    top = Path(tempfile.mkdtemp(prefix="rimo-exp-stages-"))
    try:
        repo = make_repo(top / "repo", find_mirror(),
                         predict={"backend": "constant", "limit": 5})
        # --quick (tests/benchmarks): up to validate only; its one round then runs check-params,
        # predict, score, judge, view and report all the same, for the first time.
        sh(repo, "dvc", "repro", *(["validate"] if args.quick else []))
        shim_dir, log = top / "shim", top / "stages.log"
        shim_dir.mkdir()
        shim = shim_dir / "rimo-eval"
        shim.write_text(SHIM.format(real=BIN / "rimo-eval", log=log))
        shim.chmod(0o755)
        shim_env = env()
        shim_env["PATH"] = f"{shim_dir}{os.pathsep}{shim_env['PATH']}"
        print(f"before: {load()} ({os.cpu_count()} CPUs)")
        rows = [one_round(repo, shim_env, log, n + 1) for n in range(rounds)]
        print(f"after: {load()}")
        print("wall clock, seconds")
        table(rows, 1, "round")
        print("CPU (user + system), seconds")
        table(rows, 2, "round (CPU)")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
