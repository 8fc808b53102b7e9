"""Stage report: execute ``notebooks/report.ipynb`` with papermill and export it to HTML.

The notebook's cells are short: they call rimo_eval.report.tables (DataFrames), .charts (matplotlib
figures) and .html (escaped tables); rimo_eval.report.runner executes it byte-stably.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from rimo_eval.artifacts import paths as A
from rimo_eval.artifacts.paths import NOTEBOOK
from rimo_eval.artifacts.paths import REPORT_HTML as OUT_HTML
from rimo_eval.artifacts.paths import REPORT_IPYNB as OUT_IPYNB
from rimo_eval.params.config import Params
from rimo_eval.report.runner import git_commit, render_report
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

__all__ = ["INPUTS", "NOTEBOOK", "NOTEBOOK_MODULES", "OUT_HTML", "OUT_IPYNB", "default_parameters",
           "notebook_modules", "run"]

# Notebook parameter -> (default path, the stage that produces it: named in the error message).
INPUTS: dict[str, tuple[Path, str]] = {
    "items_n_path": (A.items_path(TRACK_N), "validate"),
    "items_p_path": (A.items_path(TRACK_P), "validate"),
    "predictions_n_path": (A.predictions_path(TRACK_N), "predict"),
    "predictions_p_path": (A.predictions_path(TRACK_P), "predict"),
    "scores_n_path": (A.scores_path(TRACK_N), "score"),
    "scores_p_path": (A.scores_path(TRACK_P), "score"),
    "metrics_path": (A.METRICS_PATH, "score"),
    "breakdown_path": (A.BREAKDOWN_PATH, "score"),
    "provenance_path": (A.PROVENANCE_PATH, "score"),
    "validation_path": (A.VALIDATION_PATH, "validate"),
    "judge_path": (A.JUDGE_METRICS_PATH, "judge"),
    "judge_calibration_path": (A.JUDGE_CALIBRATION_PATH, "judge --calibrate"),
    "judge_table_path": (A.JUDGE_TABLE, "judge"),
    "params_path": (A.PARAMS_PATH, ""),
}
PRODUCERS = {name: stage for name, (_path, stage) in INPUTS.items()}
# The helpers the notebook imports (tests/report/test_report.py checks the list). The kernel
# imports them; the stage's own process does not (pandas and matplotlib cost it a second or
# more, for nothing: issue 43). The import graph tests/e2e/test_dependencies.py walks from this
# module still reaches them, through notebook_modules().
NOTEBOOK_MODULES = ("charts", "cost", "html", "judge", "selection", "tables", "years")


def notebook_modules() -> tuple[ModuleType, ...]:
    """The notebook's helper modules, imported (what a test checks them with)."""
    from rimo_eval.report import charts, cost, html, judge, selection, tables, years

    return (charts, cost, html, judge, selection, tables, years)


def default_parameters(worst_failures: int, commit: str,
                       params_path: str | os.PathLike[str] = A.PARAMS_PATH,
                       experiment: str = "") -> dict[str, Any]:
    params: dict[str, Any] = {name: path.as_posix() for name, (path, _stage) in INPUTS.items()}
    # The notebook reads the params file the CLI was given (--params), not always params.yaml.
    params.update(git_commit=commit, worst_failures=worst_failures,
                  params_path=Path(params_path).as_posix(), experiment=experiment)
    return params


def run(params: Params) -> None:
    """``params``: the CLI's validated params."""
    cfg, path = params.report, params.path
    render_report(NOTEBOOK, OUT_IPYNB, OUT_HTML,
                  # DVC names the experiment it runs in DVC_EXP_NAME (dvc.org/doc/user-guide/env).
                  default_parameters(cfg.worst_failures, git_commit(), path,
                                     os.environ.get("DVC_EXP_NAME", "")),
                  producers=PRODUCERS)
    print(f"report: wrote {OUT_IPYNB} and {OUT_HTML}", file=sys.stderr)
