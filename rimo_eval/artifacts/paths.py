"""Every artifact path and file name of the pipeline, defined once.

The stages, the report, audit, compare and the tests import these; a test checks that dvc.yaml's
outs agree with them.
"""

from __future__ import annotations

import os
from pathlib import Path

from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS

PARAMS_PATH = Path("params.yaml")
LOCK_PATH = Path("dvc.lock")

# fetch: the four upstream files, verified against fetch.sha256.
RAW_DIR = Path("data/raw")
UPSTREAM_FILES: dict[str, tuple[str, str]] = {t: (f"{t}.jsonl", f"{t}.csv") for t in TRACKS}
UPSTREAM_NAMES: tuple[str, ...] = tuple(n for t in TRACKS for n in UPSTREAM_FILES[t])

# One Parquet table per track in each of these folders.
_TABLE_FILES = {TRACK_N: "rimo_n.parquet", TRACK_P: "rimo_p.parquet"}
ITEMS_DIR = Path("data/items")
PREDICTIONS_DIR = Path("data/predictions")
SCORES_DIR = Path("data/scores")
ITEM_FILES = PREDICTION_FILES = SCORE_FILES = _TABLE_FILES

# check-params: written when the whole params file is valid; the same bytes for every valid file.
PARAMS_CHECK_PATH = Path("reports/params_check.json")
VALIDATION_PATH = Path("reports/validation.json")
# predict: what the run did (requests sent, cache hits, wall time); differs between identical runs
PREDICT_RUN_PATH = Path("reports/predict_run.json")
# score: what a user compares (the DVC metrics file), the breakdowns, where the numbers came from
METRICS_PATH = Path("reports/metrics.json")
BREAKDOWN_PATH = Path("reports/breakdown.json")
PROVENANCE_PATH = Path("reports/provenance.json")
# The run's backend and model (served model, replay file, GGUF): a DVC metrics file of one
# string, so `dvc exp show` has one "model" column whatever backend ran.
MODEL_PATH = Path("reports/model.json")
PLOTS_DIR = Path("reports/plots")
PLOT_FILES = {TRACK_N: "rimo_n_by_domain.csv", TRACK_P: "rimo_p_by_parts.csv"}
# Accuracy (RIMO-P: strict) by competition-year band (rimo_eval.score.years).
YEAR_PLOT_FILES = {TRACK_N: "rimo_n_by_year.csv", TRACK_P: "rimo_p_by_year.csv"}

# view: the run's transcript browser (a static site), which the report links into.
VIEW_DIR = Path("reports/view")

NOTEBOOK = Path("notebooks/report.ipynb")
REPORT_IPYNB = Path("reports/report.ipynb")
REPORT_HTML = Path("reports/report.html")


def table_path(folder: str | os.PathLike[str], track: str) -> Path:
    return Path(folder) / _TABLE_FILES[track]


def items_path(track: str, folder: str | os.PathLike[str] = ITEMS_DIR) -> Path:
    return table_path(folder, track)


def predictions_path(track: str, folder: str | os.PathLike[str] = PREDICTIONS_DIR) -> Path:
    return table_path(folder, track)


def scores_path(track: str, folder: Path | str = SCORES_DIR) -> Path:
    return table_path(folder, track)


def plot_path(track: str, folder: Path | str = PLOTS_DIR) -> Path:
    return Path(folder) / PLOT_FILES[track]


# judge (opt-in, RIMO-P only): its table, its metrics, and the calibration `--calibrate` writes
# (a git-tracked file, so the report can always depend on it).
JUDGE_DIR = Path("data/judge")
JUDGE_TABLE = JUDGE_DIR / "rimo_p.parquet"
JUDGE_METRICS_PATH = Path("reports/judge.json")
JUDGE_CALIBRATION_PATH = Path("reports/judge_calibration.json")
