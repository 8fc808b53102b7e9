"""How long ``rimo-eval leaderboard`` takes for many runs: 20 full runs at k = 1, 5 at k = 16.

The runs are synthetic replays over the 791 real items (the upstream mirror through the real
validate stage), predicted and scored by the real predict (replay backend) and score stages,
so their score tables and metrics.json are what the pipeline writes. Each run is committed on
its own git branch of a fresh git + DVC repo (the score tables committed to git, so no DVC
cache is needed), and the leaderboard reads every run through the same loader it uses for
experiments (rimo_eval.run: one DVC repository handle, DVC's filesystem at each revision).
``--all`` over DVC experiments: benchmarks/leaderboard_all.py.

Timed: the whole ``rimo-eval leaderboard BRANCH... --out DIR`` process (imports, loading,
the paired bootstrap over items with ``score.bootstrap``'s 1000 resamples, tests, every file
and figure), median of ``--repeats``; then the in-process phases of one build. Goal: < 30 s
each on the project's 2-core machine.

    .venv/bin/python benchmarks/leaderboard_scale.py             # both sizes, about 3 min
    .venv/bin/python benchmarks/leaderboard_scale.py --quick     # 2 runs at k = 2, one build
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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

from tests.support.leaderboard_runs import replay_rows, write_jsonl  # noqa: E402

BIN = Path(sys.executable).parent


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout


def make_repo(work: Path, runs: int, k: int, tag: str) -> tuple[Path, list[str], float]:
    """A git + DVC repo with one branch per run; returns it, the branch names, prep seconds."""
    import pandas as pd

    from rimo_eval.params.config import ScoreParams
    from rimo_eval.predict import predict
    from rimo_eval.score.stage import score
    from rimo_eval.validate.stage import run as validate
    from tests.support.factories import params, predict_section, section

    start = time.perf_counter()
    items = work / "items"
    if not items.exists():
        validate(params(validate={"errata": str(ROOT / "data/errata.yaml")}), raw_dir=find_mirror(),
                 items_dir=items, report_path=work / "validate_report.json")
    items_n = pd.read_parquet(items / "rimo_n.parquet")
    items_p = pd.read_parquet(items / "rimo_p.parquet")
    gold_n = dict(zip(items_n["problem_id"], items_n["answer"], strict=True))
    graded = items_p[items_p["gradable"]]
    gold_p = {r.problem_id: list(r.sub_solutions) for r in graded.itertuples()}
    repo = work / f"repo-{tag}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    subprocess.run([BIN / "dvc", "init", "-q"], cwd=repo, check=True)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["predict"].update({"backend": "replay", "limit": None})
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    names = []
    for i in range(runs):
        name = f"{tag}-{i:02d}"
        strength = 0.1 + 0.8 * i / max(1, runs - 1)
        git(repo, "checkout", "-q", "-b", name, "main")
        params["predict"]["replay"]["path"] = f"runs/{name}.jsonl"  # the row's model name
        params["predict"]["samples"] = k
        (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        replay = work / f"{name}.jsonl"
        write_jsonl(replay, replay_rows(name, strength, gold_n, gold_p, samples=k))
        predict(predict_section(backend="replay", samples=k, replay={"path": str(replay)}), items,
                repo / "data/predictions")
        score(section(ScoreParams, "score",
                      bootstrap={"samples": 1000, "seed": 0, "confidence": 0.95}), items,
              repo / "data/predictions", repo / "data/scores", repo / "reports/metrics.json",
              repo / "reports/plots")
        shutil.rmtree(repo / "data/predictions")  # not read by the leaderboard
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"run {name}")
        names.append(name)
    git(repo, "checkout", "-q", "main")
    return repo, names, time.perf_counter() - start


def timed_cli(repo: Path, names: list[str], out: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run([BIN / "rimo-eval", "leaderboard", *names, "--out", str(out)],
                          cwd=repo, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"rimo-eval leaderboard failed:\n{proc.stderr}")
    return time.perf_counter() - start


def phases(repo: Path, names: list[str]) -> dict[str, float]:
    """One build in this process, phase by phase (after the imports)."""
    from rimo_eval.commands.leaderboard.board import build
    from rimo_eval.commands.leaderboard.comparable import check
    from rimo_eval.commands.leaderboard.figures import figures
    from rimo_eval.commands.leaderboard.loading import load_runs
    from rimo_eval.commands.leaderboard.ranking import default_metric, find_metric
    from rimo_eval.commands.leaderboard.tables import render_html, render_markdown, render_tex
    from rimo_eval.run.reader import RunReader

    t0 = time.perf_counter()
    with RunReader(repo) as reader:  # one DVC repository handle, as the command has
        runs = load_runs(reader, names)
    t1 = time.perf_counter()
    check(runs)
    board = build(runs, find_metric(default_metric(runs[0].k), runs[0].k),
                  {"samples": 1000, "seed": 0, "confidence": 0.95})
    t2 = time.perf_counter()
    figs = figures(board, runs)
    t3 = time.perf_counter()
    render_markdown(board), render_tex(board), render_html(board, figs)
    t4 = time.perf_counter()
    return {"load": t1 - t0, "statistics": t2 - t1, "figures": t3 - t2, "tables": t4 - t3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="k = 1 runs (default 20)")
    ap.add_argument("--k16-runs", type=int, default=5, help="k = 16 runs (default 5)")
    ap.add_argument("--k16", type=int, default=16, help="k of the second group (default 16)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="tiny: the second group only, 2 runs at k = 2, one leaderboard")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.k16_runs, args.k16, args.repeats = 0, 2, 2, 1
    load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="lb-scale-") as tmp:
        work = Path(tmp)
        rows = []
        for runs, k, tag in ((args.runs, 1, "k1"), (args.k16_runs, args.k16, f"k{args.k16}")):
            if runs == 0:
                continue
            repo, names, prep = make_repo(work, runs, k, tag)
            walls = [timed_cli(repo, names, work / f"out-{tag}-{r}") for r in range(args.repeats)]
            # Byte for byte against the first build; None when there was only one.
            same = None if args.repeats < 2 else all(
                (work / f"out-{tag}-0" / f.name).read_bytes() == f.read_bytes()
                for r in range(1, args.repeats) for f in (work / f"out-{tag}-{r}").iterdir())
            rows.append({"runs": runs, "k": k, "prep_s": round(prep, 1),
                         "wall_s": [round(w, 2) for w in walls],
                         "median_s": round(statistics.median(walls), 2),
                         "phases_s": {k2: round(v, 2) for k2, v in phases(repo, names).items()},
                         "byte_identical": same})
        load = os.getloadavg()
        print(json.dumps({"rows": rows, "loadavg_start": load_start,
                          "loadavg_end": [round(x, 2) for x in load],
                          "cpus": os.cpu_count()}, indent=2))
        print("\n| runs | k | leaderboard wall (median) | runs of it | load / statistics / "
              "figures / tables (one build, in-process) | rebuilds byte-identical |")
        print("| ---: | ---: | ---: | --- | --- | --- |")
        for r in rows:
            p = r["phases_s"]
            same = "n/a (one build)" if r["byte_identical"] is None else r["byte_identical"]
            print(f"| {r['runs']} | {r['k']} | {r['median_s']:.2f} s | "
                  f"{', '.join(f'{w:.2f}' for w in r['wall_s'])} | {p['load']:.2f} / "
                  f"{p['statistics']:.2f} / {p['figures']:.2f} / {p['tables']:.2f} s | "
                  f"{same} |")


if __name__ == "__main__":
    main()
