"""Stage score: per-item grades, headline metrics with bootstrap intervals, plot data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from rimo_eval.artifacts.flags import LENIENT
from rimo_eval.artifacts.items import ITEMS_DIR, items_path, read_items_frame
from rimo_eval.artifacts.metrics_files import (
    POINTER_KEY,
    SAMPLE_KEY,
    pointer,
    sample_spec_of,
    split,
)
from rimo_eval.artifacts.model_name import predictions_model
from rimo_eval.artifacts.paths import (
    BREAKDOWN_PATH,
    METRICS_PATH,
    MODEL_PATH,
    PLOTS_DIR,
    PROVENANCE_PATH,
    SCORE_FILES,
    SCORES_DIR,
)
from rimo_eval.artifacts.predictions import (
    PREDICTIONS_DIR,
    STATUS_OK,
    STATUSES,
    predictions_path,
    read_predictions,
    read_run_id,
)
from rimo_eval.artifacts.provenance import build_provenance
from rimo_eval.errors import IntegrityError, StageError
from rimo_eval.io.atomic import write_json, write_text
from rimo_eval.io.hashing import sha256_file
from rimo_eval.io.parquet import write_parquet
from rimo_eval.params.config import Params, ScoreParams
from rimo_eval.rimo.grading import grade_n, grade_p_strict, leading_matches, match_parts
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.diagnostics import (
    FLAGS_N,
    FLAGS_P,
    engine_flags,
    flags_n,
    parse_details,
    truncated,
)
from rimo_eval.score.metrics import compute, plot_tables, sample_spec
from rimo_eval.score.samples import with_sample
from rimo_eval.score.years import year_columns
from rimo_eval.stats import bootstrap_params

# The competition year and shortlist label (rimo_eval.score.years), read from the id.
YEAR_COLUMNS = (("year", pa.int32()), ("shortlist", pa.string()))

SCORE_SCHEMAS = {
    TRACK_N: pa.schema([
        ("track", pa.string()), ("problem_id", pa.string()), ("sample", pa.int32()),
        ("domain", pa.string()), *YEAR_COLUMNS,
        ("item_hash", pa.string()), ("status", pa.string()), ("gold", pa.string()),
        ("prediction", pa.string()), ("correct", pa.bool_()),
        # Diagnostics (rimo_eval.score.diagnostics), never the metric.
        *((flag, pa.bool_()) for flag in FLAGS_N),
    ]),
    TRACK_P: pa.schema([
        ("track", pa.string()), ("problem_id", pa.string()), ("sample", pa.int32()),
        ("domain", pa.string()), *YEAR_COLUMNS,
        ("item_hash", pa.string()), ("number_of_parts", pa.int64()), ("gradable", pa.bool_()),
        ("ungradable_reason", pa.string()), ("status", pa.string()),
        ("n_predicted", pa.int64()), ("matched", pa.list_(pa.bool_())),
        ("n_matched", pa.int64()), ("prefix_len", pa.int64()), ("strict", pa.bool_()),
        ("prefix_score", pa.float64()),
        *((flag, pa.bool_()) for flag in FLAGS_P),
    ]),
}


def join_predictions(items: pd.DataFrame, preds: pd.DataFrame, track: str) -> pd.DataFrame:
    """Evaluated items = the rows of the predictions table (one per item and sample); each must
    match an item's content."""
    preds = with_sample(preds)
    dup = preds["problem_id"][preds.duplicated(["problem_id", "sample"])]
    if not dup.empty:
        raise StageError(f"{track} predictions: duplicate problem_id {sorted(set(dup))}")
    merged = preds.merge(items, on="problem_id", how="left", suffixes=("_pred", ""),
                         validate="many_to_one", indicator=True)
    unknown = merged.loc[merged["_merge"] == "left_only", "problem_id"].tolist()
    if unknown:
        raise StageError(f"{track} predictions: unknown problem_id {unknown[:10]}")
    bad = sorted(set(merged["status"]) - set(STATUSES))
    if bad:
        raise StageError(f"{track} predictions: unknown status {bad} (expected one of "
                         f"{list(STATUSES)})")
    stale = merged.loc[merged["item_hash"] != merged["content_hash"], "problem_id"].tolist()
    if stale:
        raise StageError(f"{track} predictions were made for other item contents "
                         f"({stale[:10]}...): rerun the predict stage")
    return merged.sort_values(["problem_id", "sample"], kind="stable").reset_index(drop=True)


def check_one_run(preds: dict[str, pd.DataFrame], preds_dir: Path) -> None:
    """Both tables must come from one predict run; a predict killed between publishing the two
    files would otherwise let one run's RIMO-N be scored beside another's RIMO-P. The run id
    covers the backend fingerprint and the sample, so a change of ``limit`` alone is caught.
    An empty table (limit 0) has no rows: its file's schema metadata holds the run id."""
    paths = {t: predictions_path(t, preds_dir) for t in TRACKS}
    ids: dict[str, set[str]] = {}
    for track, df in preds.items():
        if "run_id" not in df.columns:
            raise IntegrityError(f"{paths[track]}: no run_id column (written before run ids): "
                                 "rerun the predict stage")
        found = set(df["run_id"].dropna()) if len(df) else {read_run_id(paths[track])}
        ids[track] = {r for r in found if r}
    if len(set().union(*ids.values())) > 1:
        shown = "; ".join(f"{paths[t]} has run id {', '.join(sorted(ids[t])) or '-'}"
                          for t in TRACKS)
        raise IntegrityError(f"predictions come from more than one predict run: {shown}: "
                             "rerun the predict stage")


def score_n(items: pd.DataFrame, preds: pd.DataFrame) -> pd.DataFrame:
    df = join_predictions(items, preds, TRACK_N)
    rows = []
    for r in df.to_dict("records"):
        raw = r["prediction"]
        pred = raw if r["status"] == STATUS_OK and isinstance(raw, str) else None
        correct = grade_n(pred, r["answer"])
        rows.append({"track": TRACK_N, "problem_id": r["problem_id"],
                     "sample": int(r["sample"]), "domain": r["domain"],
                     **year_columns(r["problem_id"]),
                     "item_hash": r["item_hash"], "status": r["status"], "gold": r["answer"],
                     "prediction": pred, "correct": correct,
                     **flags_n(r["status"], parse_details(r["details"]), pred, r["answer"],
                               correct)})
    return pd.DataFrame(rows, columns=SCORE_SCHEMAS[TRACK_N].names)


def score_p(items: pd.DataFrame, preds: pd.DataFrame) -> pd.DataFrame:
    df = join_predictions(items, preds, TRACK_P)
    rows = []
    for r in df.to_dict("records"):
        raw = r["prediction"]
        details = parse_details(r["details"])
        # Parquet lists come back as arrays; a null comes back as None or NaN.
        ok = r["status"] == STATUS_OK and raw is not None and not isinstance(raw, float)
        pred = [str(x) for x in raw] if ok else []
        gold = list(r["sub_solutions"])
        gradable = bool(r["gradable"])
        matched = match_parts(pred, gold) if gradable else []
        prefix = leading_matches(matched)
        parts = int(r["number_of_parts"])
        rows.append({
            "track": TRACK_P, "problem_id": r["problem_id"], "sample": int(r["sample"]),
            "domain": r["domain"], **year_columns(r["problem_id"]),
            "item_hash": r["item_hash"], "number_of_parts": parts, "gradable": gradable,
            "ungradable_reason": r["ungradable_reason"], "status": r["status"],
            "n_predicted": len(pred), "matched": matched, "n_matched": sum(matched),
            "prefix_len": prefix, "strict": gradable and grade_p_strict(pred, gold),
            "prefix_score": prefix / parts if gradable else 0.0,
            "truncated": truncated(details),
            **engine_flags(details),
        })
    return pd.DataFrame(rows, columns=SCORE_SCHEMAS[TRACK_P].names)


def run_model(preds: dict[str, pd.DataFrame]) -> str | None:
    """Backend and model the predictions were made with (rimo_eval.artifacts.model_name), from what
    they record; None when no item was evaluated (DVC then shows "-")."""
    return predictions_model(preds[t] for t in TRACKS)


def score(cfg: ScoreParams, items_dir: Path = ITEMS_DIR,
          preds_dir: Path = PREDICTIONS_DIR, scores_dir: Path = SCORES_DIR,
          metrics_path: Path = METRICS_PATH, plots_dir: Path = PLOTS_DIR,
          params: Params | None = None,
          breakdown_path: Path | None = None, provenance_path: Path | None = None,
          model_path: Path | None = None) -> dict[str, Any]:
    """``cfg``: the score section (the one that applies, whatever ``params.score`` holds);
    ``params``: the whole params file (the upstream pin, the sample and the price), None where
    there is none (no pin, sample or price recorded). The breakdown, provenance and model files
    sit beside ``metrics_path`` unless given. Returns the joined block
    (rimo_eval.artifacts.metrics_files.join's shape)."""
    boot = bootstrap_params(cfg)
    predict_cfg, fetch_cfg = (None, None) if params is None else (params.predict, params.fetch)
    items = {t: read_items_frame(t, items_dir) for t in TRACKS}
    preds = {t: read_predictions(t, preds_dir) for t in TRACKS}
    check_one_run(preds, Path(preds_dir))
    scores = {TRACK_N: score_n(items[TRACK_N], preds[TRACK_N]),
              TRACK_P: score_p(items[TRACK_P], preds[TRACK_P])}
    metrics = compute(scores, {t: len(items[t]) for t in TRACKS}, boot,
                      sample_spec(predict_cfg), preds, predict_cfg, cfg)
    for track, df in scores.items():
        table = pa.Table.from_pandas(df, schema=SCORE_SCHEMAS[track], preserve_index=False)
        write_parquet(table, scores_dir / SCORE_FILES[track])
    for name, text in plot_tables(metrics).items():
        write_text(plots_dir / name, text)
    # After the scores are written, so the block can name their hashes too.
    provenance = build_provenance(
        inputs=[*(items_path(t, items_dir) for t in TRACKS),
                *(predictions_path(t, preds_dir) for t in TRACKS)],
        outputs=[scores_dir / SCORE_FILES[t] for t in TRACKS],
        predictions=preds, score_params={"bootstrap": boot},
        fetch_cfg=fetch_cfg)
    # How the sample was drawn is provenance; metrics.json keeps only what compares.
    provenance[SAMPLE_KEY] = sample_spec_of(metrics)
    metrics_path = Path(metrics_path)
    breakdown_path = breakdown_path or metrics_path.parent / BREAKDOWN_PATH.name
    provenance_path = provenance_path or metrics_path.parent / PROVENANCE_PATH.name
    model_path = model_path or metrics_path.parent / MODEL_PATH.name
    view, breakdown = split(metrics)
    write_json(breakdown_path, breakdown)
    write_json(model_path, {"model": run_model(preds)})
    write_json(provenance_path, provenance)
    # Last, naming the provenance it belongs to: a copied metrics.json still points to it.
    view[POINTER_KEY] = pointer(sha256_file(provenance_path), PROVENANCE_PATH)
    write_json(metrics_path, view, sort_keys=False)
    return {**metrics, "provenance": provenance}


def run(params: Params) -> None:
    metrics = score(params.score, params=params)
    n, p = metrics[TRACK_N], metrics[TRACK_P]
    print(f"score: RIMO-N accuracy {n['accuracy']} over {n['n']}; RIMO-P strict {p['strict']}, "
          f"sub-problem {p['sub_problem_accuracy']}, prefix {p['prefix_score']} over {p['n']}")
    diag = n.get("diagnostics") or {}
    if diag:
        # lenient_match counts agreement (right after normalisation, the oracle's every reply):
        # said apart from the flags, which name something wrong with a reply.
        flags = ", ".join(f"{f} {diag[f]}" for f in FLAGS_N if diag.get(f) and f != LENIENT)
        diag_p = p.get("diagnostics") or {}
        flags_p = ", ".join(f"{f} {diag_p[f]}" for f in FLAGS_P if diag_p.get(f))
        print(f"score: diagnostics (not the metric): RIMO-N lenient accuracy "
              f"{diag['lenient_accuracy']} ({diag.get(LENIENT, 0)} of {n['n']} replies right "
              f"after MathArena-style normalisation, a measure of agreement, not a flag); "
              f"flagged replies: {flags or 'none'}"
              + (f"; RIMO-P: {flags_p}" if flags_p else ""))
