"""How long ``rimo-eval leaderboard --all`` takes over many DVC experiments (issue 41).

The runs are synthetic replays over the 791 real items (as ``leaderboard_scale.py`` makes
them), predicted and scored by the real predict (replay backend) and score stages in a copy of
the project (``tests/support/pipeline_repo.make_repo``, validate run by ``dvc repro``), each
recorded as a DVC experiment of the real pipeline: its outputs committed to dvc.lock and the
cache (``dvc commit``), then saved under its name (``dvc exp save``), so ``--all`` finds them
as it finds ``dvc exp run`` experiments: refs under refs/exps, outputs in the local cache.

Timed: the whole ``rimo-eval leaderboard --all --out DIR`` process, once per code checkout
given (``--code DIR``, repeatable: each is put first on PYTHONPATH, so one built repo times
two versions of the package, e.g. a baseline and this one). Goal: <= 30 s at 50 runs, k = 1.

    .venv/bin/python benchmarks/leaderboard_all.py --runs 50 --keep /tmp/lb50 \\
        --code /path/to/baseline --code .
    .venv/bin/python benchmarks/leaderboard_all.py --quick     # 3 experiments, one build
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import yaml  # noqa: E402
from predict_throughput import find_mirror  # noqa: E402

from tests.support.leaderboard_runs import replay_rows  # noqa: E402
from tests.support.pipeline_repo import env, make_repo, sh  # noqa: E402
from tests.support.replay_files import repo_gold, write_jsonl  # noqa: E402

BIN = Path(sys.executable).parent


def build(repo: Path, runs: int) -> tuple[float, list[str]]:
    """The project in ``repo`` with ``runs`` experiments at k = 1; (seconds, names)."""
    from rimo_eval.artifacts.paths import (
        ITEMS_DIR,
        METRICS_PATH,
        PLOTS_DIR,
        PREDICTIONS_DIR,
        SCORES_DIR,
    )
    from rimo_eval.params.config import parse_params
    from rimo_eval.predict import predict
    from rimo_eval.score.stage import score
    from tests.support.factories import predict_section

    start = time.perf_counter()
    make_repo(repo, find_mirror(), predict={"backend": "replay", "limit": None,
                                            "replay": {"path": "runs/r-00.jsonl"}})
    sh(repo, "dvc", "repro", "validate")
    gold_n, gold_p = repo_gold(repo)
    params_path = repo / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    names = []
    cwd = os.getcwd()
    os.chdir(repo)  # the replay path is relative, as params.yaml gives it
    try:
        # Run 0 is the workspace's run, committed (the baseline); runs 1..N are experiments.
        for i in range(runs + 1):
            name = f"r-{i:02d}"
            rel = f"runs/{name}.jsonl"
            strength = 0.1 + 0.8 * i / max(1, runs)
            write_jsonl(repo / rel, replay_rows(name, strength, gold_n, gold_p))
            params["predict"]["replay"]["path"] = rel  # the run's model name
            params_path.write_text(yaml.safe_dump(params, sort_keys=False))
            predict(predict_section(backend="replay", limit=None, replay={"path": rel}),
                    repo / ITEMS_DIR, repo / PREDICTIONS_DIR)
            whole = parse_params(params, params_path)
            score(whole.score, repo / ITEMS_DIR, repo / PREDICTIONS_DIR, repo / SCORES_DIR,
                  repo / METRICS_PATH, repo / PLOTS_DIR, params=whole)
            if i == 0:
                sh(repo, "dvc", "commit", "-q", "-f", "predict", "score")
                sh(repo, "git", "add", "-A")
                sh(repo, "git", "commit", "-qm", "the baseline run")
                continue
            # `exp save` commits predict's and score's outputs (dvc.lock, the cache) and the
            # changed git-tracked reports, as `dvc exp run` would.
            sh(repo, "dvc", "exp", "save", "-q", "-f", "-n", name, "-I", rel,
               "predict", "score")
            names.append(name)
    finally:
        os.chdir(cwd)
    return time.perf_counter() - start, names


def timed(repo: Path, code: Path, out: Path) -> tuple[float, dict[str, object]]:
    environ = {**env(), "PYTHONPATH": str(code.resolve())}
    start = time.perf_counter()
    proc = subprocess.run([BIN / "rimo-eval", "leaderboard", "--all", "--json", "--out",
                           str(out)], cwd=repo, env=environ, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"leaderboard --all with {code} failed:\n{proc.stderr[-3000:]}")
    board = json.loads(proc.stdout)
    return wall, {"ranked": len(board["runs"]), "left_out": len(board["left_out"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50,
                    help="experiments at k = 1 (default 50), beside the workspace's run")
    ap.add_argument("--code", type=Path, action="append",
                    help="a checkout whose package runs the leaderboard (repeatable; default: "
                         "this one)")
    ap.add_argument("--keep", type=Path, help="build the repo here, or reuse it if it is there")
    ap.add_argument("--quick", action="store_true", help="3 experiments, one build")
    args = ap.parse_args()
    if args.quick:
        args.runs = 3
    codes = args.code or [ROOT]
    load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="lb-all-") as tmp:
        repo = args.keep or Path(tmp) / "repo"
        prep = None
        if not (repo / ".dvc").is_dir():
            prep, _ = build(repo, args.runs)
        rows = []
        for n, code in enumerate(codes):
            wall, found = timed(repo, code, Path(tmp) / f"out-{n}")
            rows.append({"code": str(code), "wall_s": round(wall, 2), **found})
        print(json.dumps({"runs": args.runs, "k": 1, "prep_s": None if prep is None else
                          round(prep, 1), "rows": rows, "loadavg_start": load_start,
                          "loadavg_end": [round(x, 2) for x in os.getloadavg()],
                          "cpus": os.cpu_count()}, indent=2))
        print("\n| code | experiments | leaderboard --all wall | ranked |")
        print("| --- | ---: | ---: | ---: |")
        for r in rows:
            print(f"| {r['code']} | {args.runs} | {r['wall_s']:.2f} s | {r['ranked']} |")


if __name__ == "__main__":
    main()
