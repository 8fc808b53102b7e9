"""``rimo-eval export --format eee`` at scale: wall time and peak RSS of exporting a k = 64 run
whose every reply (a RIMO-N sample, a RIMO-P part) carries ``--reasoning-chars`` of reasoning.

The workload is synthetic and laid out as predict and score write it: 335 RIMO-N and 456
RIMO-P items (1 to 3 parts), predictions tables in predict's row groups
(``artifacts.predictions.row_groups``), each reasoning text distinct (a slice of a random-letter
pool, so Parquet's dictionary cannot fold them). The export runs in a fresh process
(``--child``) through the export's own functions (``write_eee`` into ``output_folder``) over
the run's files read as ``load_export_run`` hands them, without DVC: the figure is the
export's, not the workload's.

    .venv/bin/python benchmarks/export_scale.py            # k = 64, 32 KB reasoning
    .venv/bin/python benchmarks/export_scale.py --quick    # k = 2, 2 KB
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import string
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

N_ITEMS, P_ITEMS = 335, 456


def build(work: Path, k: int, chars: int) -> int:
    """The run's tables under ``work``; the UTF-8 bytes of reasoning written."""
    import pandas as pd
    import pyarrow.parquet as pq

    from rimo_eval.artifacts.predictions import PREDICTION_SCHEMAS, row_groups
    from rimo_eval.io.hashing import canonical_json
    from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

    rng = random.Random(0)
    pool = "".join(rng.choices(string.ascii_lowercase + "  \n$\\{}", k=4 * 2**20))
    counter = iter(range(10**9))

    def text() -> str:
        i = next(counter)
        start = (i * 7919) % (len(pool) - chars)
        return f"{i}: {pool[start:start + chars - 12]}"

    ids = {TRACK_N: [f"n{i:04d}" for i in range(N_ITEMS)],
           TRACK_P: [f"p{i:04d}" for i in range(P_ITEMS)]}
    parts = {pid: 1 + i % 3 for i, pid in enumerate(ids[TRACK_P])}
    pd.DataFrame({"problem_id": ids[TRACK_N], "problem": [f"Find x ({p})." for p in
                                                          ids[TRACK_N]],
                  "answer": ["7"] * N_ITEMS}).to_parquet(work / "items_n.parquet")
    pd.DataFrame({"problem_id": ids[TRACK_P], "problem": [f"Prove ({p})." for p in
                                                          ids[TRACK_P]],
                  "sub_solutions": [[f"s{j}" for j in range(parts[p])] for p in ids[TRACK_P]],
                  "gradable": True, "number_of_parts": [parts[p] for p in ids[TRACK_P]]}
                 ).to_parquet(work / "items_p.parquet")
    pd.DataFrame({"problem_id": [p for p in ids[TRACK_N] for _ in range(k)],
                  "sample": list(range(k)) * N_ITEMS, "correct": True}
                 ).to_parquet(work / "scores_n.parquet")
    pd.DataFrame({"problem_id": [p for p in ids[TRACK_P] for _ in range(k)],
                  "sample": list(range(k)) * P_ITEMS, "strict": True, "prefix_score": 1.0}
                 ).to_parquet(work / "scores_p.parquet")
    size = 0

    def rows(track: str) -> Any:
        nonlocal size
        for pid in ids[track]:
            for j in range(k):
                if track == TRACK_N:
                    reasoning: Any = text()
                    size += len(reasoning)
                    pred: Any = "7"
                    details = {"text": "So \\boxed{7}.", "finish_reason": "stop",
                               "usage": {"prompt_tokens": 200, "completion_tokens": chars // 4}}
                else:
                    reasoning = [text() for _ in range(parts[pid])]
                    size += sum(map(len, reasoning))
                    pred = [f"s{m}" for m in range(parts[pid])]
                    details = {"parts": [{"text": p, "finish_reason": "stop"} for p in pred]}
                yield {"track": track, "problem_id": pid, "sample": j, "item_hash": "h",
                       "prediction": pred, "status": "ok", "error": None,
                       "details": canonical_json(details), "reasoning": reasoning,
                       "raw_text": None, "backend": "replay", "backend_params": "{}",
                       "fingerprint": "f", "run_id": "r"}

    for track, name in ((TRACK_N, "preds_n.parquet"), (TRACK_P, "preds_p.parquet")):
        schema = PREDICTION_SCHEMAS[track]
        with pq.ParquetWriter(work / name, schema, compression="zstd") as writer:
            for group in row_groups(rows(track), schema):
                writer.write_table(group)
    return size


def child(work: Path, out: Path, k: int) -> None:
    """The export of the run in ``work`` (as ``load_export_run`` hands a run over)."""
    import pandas as pd

    from rimo_eval.commands.export.eee import write_eee
    from rimo_eval.commands.export.source import ExportRun
    from rimo_eval.io.outputs import output_folder
    from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

    suffix = {TRACK_N: "n", TRACK_P: "p"}
    metrics = {TRACK_N: {"accuracy": 1.0, "n": N_ITEMS, "k": k, "pass_at_k": 1.0,
                         "ci": {"accuracy": {"low": 0.98, "high": 1.0}}},
               TRACK_P: {"strict": 1.0, "prefix_score": 1.0, "sub_problem_accuracy": 1.0,
                         "n": P_ITEMS, "k": k, "ci": {}}}
    run = ExportRun(
        label="bench", rev=None, date="2026-01-01T00:00:00+00:00", metrics=metrics,
        params={}, model="bench/model",
        items={t: pd.read_parquet(work / f"items_{s}.parquet") for t, s in suffix.items()},
        scores={t: pd.read_parquet(work / f"scores_{s}.parquet") for t, s in suffix.items()},
        predictions_table=lambda t: str(work / f"preds_{suffix[t]}.parquet"))
    with output_folder(out, "export", "bench") as tmp:
        _, rows = write_eee(run, tmp, "bench/model", "bench")
    print(json.dumps({"rows": rows}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--reasoning-chars", type=int, default=32_000)
    parser.add_argument("--quick", action="store_true", help="k = 2, 2,000 characters")
    parser.add_argument("--child", nargs=3, metavar=("WORK", "OUT", "K"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]), int(args.child[2]))
        return
    from benchmarks.timed import run_timed

    k, chars = (2, 2000) if args.quick else (args.k, args.reasoning_chars)
    work = Path(tempfile.mkdtemp(prefix="rimo-export-bench-"))
    try:
        size = build(work, k, chars)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        timed = run_timed([sys.executable, __file__, "--child", str(work), str(work / "out"),
                           str(k)], work, env)
        if timed.returncode:
            raise SystemExit(f"export failed:\n{timed.output}")
        rows = json.loads(timed.output.strip().splitlines()[-1])["rows"]
        (samples,) = (work / "out").glob("data/rimo/*/*/*_samples.jsonl")
        print("| k | rows | reasoning written | JSONL | wall | peak RSS |\n"
              f"|---|---|---|---|---|---|\n| {k} | {rows} | {size / 2**20:.0f} MiB | "
              f"{samples.stat().st_size / 2**20:.0f} MiB | {timed.wall_s:.1f} s | "
              f"{timed.rss_mib:.0f} MiB |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
