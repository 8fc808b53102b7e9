"""Stage judge (opt-in): RIMO-P sub-solutions graded by an LLM judge, upstream's protocol.

Never the primary metric: exact match (the score stage) stays the benchmark's measure. This
stage writes ``data/judge/rimo_p.parquet`` (one row per item, sample and part: verdict, reason,
raw judge text, fingerprints) and ``reports/judge.json`` (``RIMO-P.judge.*``). With
``judge.enabled: false`` (the default) it sends nothing and writes a zero-row table and a
"disabled" record, so the DAG is the same either way and no other artifact changes.

Every part of every sample is judged, also after a part judged incorrect: upstream stops at the
first incorrect part, which gives the same prefix score (each call is independent) but no
sub-problem accuracy. ``rimo-eval judge --calibrate`` is in ``calibrate``.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from rimo_eval.artifacts import judge_record
from rimo_eval.artifacts.items import ITEMS_DIR, Item, load_items
from rimo_eval.artifacts.paths import JUDGE_METRICS_PATH, JUDGE_TABLE, SCORES_DIR, scores_path
from rimo_eval.artifacts.predictions import PREDICTIONS_DIR, STATUS_OK, read_predictions
from rimo_eval.errors import DataError, StageError
from rimo_eval.io.atomic import write_json, write_with
from rimo_eval.io.parquet import records
from rimo_eval.params.config import JudgeParams, Params
from rimo_eval.rimo.tracks import TRACK_P

if TYPE_CHECKING:
    import pandas as pd

# The judge's engine (the chat transport, pandas, the bootstrap) is imported where it is used:
# disabled, the default, the stage writes its empty record with none of it.

JUDGE_SCHEMA = pa.schema([
    ("problem_id", pa.string()), ("sample", pa.int64()), ("part", pa.int64()),
    ("number_of_parts", pa.int64()), ("item_hash", pa.string()),
    ("candidate", pa.string()),  # the text judged
    ("exact_match", pa.bool_()),  # the score stage's verdict on this part (null: not scored)
    ("verdict", pa.string()),  # correct | incorrect | unparsable | missing | error
    ("reason", pa.string()), ("parse", pa.string()), ("raw_text", pa.string()),
    ("request_sha256", pa.string()), ("error", pa.string()), ("judge_model", pa.string()),
    ("fingerprint", pa.string()), ("predictions_fingerprint", pa.string()),
])
DISABLED = {"enabled": False,
            "note": "judge.enabled is false: nothing judged (RIMO-P is graded by exact match)"}


def _absent(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _samples(row: Mapping[str, Any]) -> tuple[int, list[str]]:
    """(sample, candidate parts) of one predictions row (one row per sample); a failed item
    has no parts."""
    ok = row["status"] == STATUS_OK and not _absent(row["prediction"])
    return int(row.get("sample", 0)), [str(p).strip() for p in row["prediction"]] if ok else []


def _exact(scores: pd.DataFrame) -> dict[tuple[str, int], list[bool]]:
    """(problem_id, sample) -> the score stage's per-part matches."""
    out = {}
    for r in scores.to_dict("records"):
        flags = r.get("matched")
        sample = int(r["sample"]) if "sample" in r else 0
        out[(str(r["problem_id"]), sample)] = [] if flags is None else [bool(f) for f in flags]
    return out


def _check_same_items(items: dict[str, Item], frame: pd.DataFrame, path: Path) -> None:
    stale = sorted(pid for pid, h in zip(frame["problem_id"], frame["item_hash"], strict=True)
                   if pid not in items or items[pid].content_hash != h)
    if stale:
        raise DataError(f"{path}: rows for unknown or changed RIMO-P items {stale[:10]} "
                        f"(rerun predict and score before judge)")


def build_rows(cfg: JudgeParams, items_dir: Path, preds_dir: Path, scores_dir: Path
               ) -> tuple[list[dict[str, Any]], int]:
    """The judge table's rows (sorted) and the number of ungradable items left out."""
    import pandas as pd

    from rimo_eval.judge.judging import Job, judge_fingerprint, judge_jobs

    items = {it.problem_id: it for it in load_items(TRACK_P, items_dir)}
    preds = read_predictions(TRACK_P, preds_dir)
    _check_same_items(items, preds, preds_dir / "rimo_p.parquet")
    score_file = scores_path(TRACK_P, scores_dir)
    if not score_file.exists():
        raise DataError(f"{score_file}: scores not found (run the score stage first)")
    scores = pd.read_parquet(score_file)
    _check_same_items(items, scores, score_file)
    exact = _exact(scores)
    fp = judge_fingerprint(cfg)
    rows, jobs, ungradable = [], [], 0
    for row in sorted(records(preds), key=lambda r: (r["problem_id"],
                                                               r.get("sample", 0))):
        item = items[row["problem_id"]]
        if not item.gradable:
            ungradable += 1
            continue
        sample, parts = _samples(row)
        flags = exact.get((item.problem_id, sample))
        for index in range(item.number_of_parts):
            candidate = parts[index] if index < len(parts) else None
            jobs.append(Job(item.problem, item.sub_solutions, index, candidate))
            rows.append({"problem_id": item.problem_id, "sample": sample,
                         "part": index + 1, "number_of_parts": item.number_of_parts,
                         "item_hash": item.content_hash, "candidate": candidate,
                         "exact_match": flags[index] if flags and index < len(flags)
                         else None,
                         "fingerprint": fp, "predictions_fingerprint": row["fingerprint"]})
    for row, verdict in zip(rows, judge_jobs(cfg, jobs), strict=True):
        row.update(verdict)
    return rows, ungradable


def write_table(rows: list[dict[str, Any]], path: Path) -> None:
    table = pa.Table.from_pylist(rows, schema=JUDGE_SCHEMA)
    write_with(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def judge(params: Params, items_dir: Path = ITEMS_DIR,
          preds_dir: Path = PREDICTIONS_DIR, scores_dir: Path = SCORES_DIR,
          table_path: Path = JUDGE_TABLE, metrics_path: Path = JUDGE_METRICS_PATH
          ) -> dict[str, Any]:
    cfg = params.judge
    if not cfg.enabled:
        write_table([], table_path)
        write_json(metrics_path, judge_record.to_file(DISABLED))
        return DISABLED
    import pandas as pd

    from rimo_eval.judge import chat
    from rimo_eval.judge.judging import judge_fingerprint
    from rimo_eval.judge.metrics import judge_metrics
    from rimo_eval.stats import bootstrap_params

    chat.check(cfg)  # configuration errors before any file is read
    rows, ungradable = build_rows(cfg, items_dir, preds_dir, scores_dir)
    _fail_if_every_request_failed(rows)
    frame = pd.DataFrame(rows, columns=JUDGE_SCHEMA.names)
    boot = bootstrap_params(params.score)
    block = {**judge_metrics(frame, boot),
             "ungradable": ungradable, "model": cfg.model, "fingerprint": judge_fingerprint(cfg)}
    report = {"enabled": True, TRACK_P: {"judge": block},
              "note": "LLM-judge measurement (upstream's protocol); not the benchmark's primary "
                      "metric, which is exact match in reports/metrics.json"}
    write_table(rows, table_path)
    write_json(metrics_path, judge_record.to_file(report))
    return report


def _fail_if_every_request_failed(rows: list[dict[str, Any]]) -> None:
    """A judge whose every request failed measured nothing: a failed stage, not a record of
    zeros (the replies received stay cached for the re-run)."""
    from rimo_eval.judge.metrics import ERROR, MISSING

    sent = [r for r in rows if r["verdict"] != MISSING]
    if sent and all(r["verdict"] == ERROR for r in sent):
        common, count = Counter(str(r["error"])[:200] for r in sent).most_common(1)[0]
        raise StageError(f"judge: all {len(sent)} judge requests ended in an error; the "
                         f"commonest ({count}x): {common}. Nothing was written.")


def run(params: Params) -> None:
    report = judge(params)
    if not report["enabled"]:
        print("judge: disabled (judge.enabled: false); wrote the empty record", file=sys.stderr)
        return
    j = report[TRACK_P]["judge"]
    print(f"judge: RIMO-P prefix {j['prefix_score']}, strict {j['strict']}, sub-problem "
          f"{j['sub_problem_accuracy']} over {j['n']} items ({j['unparsable']} unparsable, "
          f"{j['errors']} errors) by {j['model']}", file=sys.stderr)


def calibrate(params: Params) -> None:
    from rimo_eval.judge.calibrate import run as run_calibration

    run_calibration(params)
