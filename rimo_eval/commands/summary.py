"""``rimo-eval summary``: what ``make repro`` ends with, in a dozen lines.

The headline metrics with their intervals, whether the run was a sample, which backend made the
predictions, and where the report and the metrics files are. Read from the artifacts alone
(metrics.json, the predictions tables), so it describes the run, not today's params.yaml.
"""

from __future__ import annotations

import argparse
import configparser
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from rimo_eval.artifacts import numbers
from rimo_eval.artifacts.paths import (
    BREAKDOWN_PATH,
    METRICS_PATH,
    PROVENANCE_PATH,
    REPORT_HTML,
    predictions_path,
)
from rimo_eval.core import metrics_files
from rimo_eval.core.config import Params
from rimo_eval.errors import DataError
from rimo_eval.io.json_object import read_object
from rimo_eval.params.section import key_of
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS

# The `dvc exp show` view to compare experiments: name, the two headline metrics, backend and
# model of whatever backend ran (reports/model.json) and the sample size (predict.limit); it
# fits a 120-column terminal, pager on (tests/e2e/test_dvc_views.py).
EXP_SHOW_VIEW = (r"dvc exp show --drop '.*' --keep 'Experiment|RIMO-N\.accuracy$|"
                 r"RIMO-P\.prefix_score$|^model$|predict\.limit$'")

# (track, key, label): the rows of the headline block, RIMO-N's one metric then RIMO-P's three.
ROWS = ((TRACK_N, "accuracy", "accuracy"), (TRACK_P, "prefix_score", "prefix score"),
        (TRACK_P, "strict", "strict"), (TRACK_P, "sub_problem_accuracy", "sub-problem accuracy"))


def pct(x: Any) -> str:
    return numbers.pct(x, dash="-")


def interval(block: Mapping[str, Any], key: str) -> str:
    low, high = metrics_files.interval(block, key)
    if low is None or high is None:
        return "(no interval)"
    return f"[{pct(low)}, {pct(high)}]"


def run_line(sample: Mapping[str, Any]) -> str:
    evaluated, total = sample.get("evaluated") or {}, sample.get("total") or {}
    counts = ", ".join(f"{evaluated.get(t, '?')}/{total.get(t, '?')} {t}" for t in TRACKS)
    if sample.get("is_sample"):
        return (f"run: SAMPLE of {counts} items (predict.limit {sample.get('limit')}, seed "
                f"{sample.get('seed')})\n  the full run: dvc exp run -S predict.limit=null")
    return f"run: full benchmark, {counts} items"


def has_remote(root: Path) -> bool:
    """Whether a DVC remote is configured (``.dvc/config`` or ``config.local``): only then can
    ``dvc pull`` bring anything back."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read([root / ".dvc/config", root / ".dvc/config.local"], encoding="utf-8")
    except configparser.Error:
        return False
    return any(s.startswith("remote ") or s.startswith("'remote ") for s in parser.sections())


def restore_hint(root: Path, them: str = "them") -> str:
    """How to get a run's outputs back. After a failed `dvc exp run` DVC has removed the
    outputs of the stage that failed; with no remote, `dvc pull` cannot help."""
    hint = (f"a failed `dvc exp run` removed {them}: `dvc checkout` (last commit) or "
            f"`dvc exp apply NAME` restores {them}")
    return hint + ("; `dvc pull` (remote)" if has_remote(root) else "")


def backend_line(root: Path, params: Params | Mapping[str, Any] | None) -> str:
    """Backend and fingerprint from the predictions tables; the model name from the params."""
    seen: set[str] = set()
    found = False
    for track in TRACKS:
        path = root / predictions_path(track)
        if path.is_file():
            found = True
            frame = pd.read_parquet(path, columns=["backend", "fingerprint"])
            seen |= {f"{b} (fingerprint {str(f)[:12]})"
                     for b, f in zip(frame["backend"], frame["fingerprint"], strict=True)}
    if not seen:
        return ("backend: none recorded (the predictions tables have no rows)" if found else
                f"backend: unknown (no predictions tables)\n  {restore_hint(root)}")
    line = f"backend: {', '.join(sorted(seen))}"
    predict = key_of(params, "predict")
    backend = key_of(predict, "backend")
    model = key_of(key_of(predict, backend), "model") if isinstance(backend, str) else None
    if model and all(s.startswith(f"{backend} ") for s in seen):
        line += f", model {model}"
    return line


def samples_line(metrics: Mapping[str, Any]) -> str | None:
    n, p = metrics.get(TRACK_N) or {}, metrics.get(TRACK_P) or {}
    k = n.get("k") or p.get("k")
    if not k:
        return None
    mean_n, mean_p = n.get("mean_at_k") or {}, p.get("mean_at_k") or {}
    return (f"k = {k} samples: RIMO-N mean@k {pct(mean_n.get('accuracy'))}, pass@k "
            f"{pct(n.get('pass_at_k'))}, maj@k {pct(n.get('maj_at_k'))}; RIMO-P mean@k prefix "
            f"{pct(mean_p.get('prefix_score'))}, pass@k strict {pct(p.get('pass_at_k'))}")


def summary(root: Path = Path("."), params: Params | Mapping[str, Any] | None = None) -> str:
    path = root / METRICS_PATH
    if not path.is_file():
        raise DataError(f"{METRICS_PATH.as_posix()}: not found: run `dvc repro`, or if "
                        f"{restore_hint(root, 'it')}")
    metrics = read_object(path)
    n, p = metrics.get(TRACK_N) or {}, metrics.get(TRACK_P) or {}
    # predict.limit and sample_seed are in the provenance file (older runs: in metrics.json).
    prov = root / PROVENANCE_PATH
    spec = (read_object(prov).get("sample") or {}) if prov.is_file() else {}
    lines = [run_line({**(metrics.get("sample") or {}), **spec}), backend_line(root, params)]
    for track, key, label in ROWS:
        block = n if track == TRACK_N else p
        lines.append(f"  {track} {label:<21} {pct(block.get(key)):>6}  "
                     f"95% {interval(block, key)}")
    lines.append(f"  {TRACK_N}: {n.get('correct', '?')}/{n.get('n', '?')} correct, "
                 f"{n.get('missing', '?')} missing, {n.get('errors', '?')} errors (count wrong)")
    lines.append(f"  {TRACK_P}: {p.get('n', '?')} gradable, {p.get('ungradable', '?')} "
                 f"ungradable (left out), {p.get('missing', '?')} missing, "
                 f"{p.get('errors', '?')} errors")
    extra = samples_line(metrics)
    if extra:
        lines.append(extra)
    not_bare = ((n.get("diagnostics") or {}).get("not_bare") or 0)
    if not_bare:
        # A replayed answer given as a whole reply scores wrong as it is: never silently.
        lines.append(f"  warning: {not_bare} replayed {TRACK_N} prediction(s) are not bare "
                     f"answers (\\boxed{{}}, words or LaTeX) and score wrong: give the answer "
                     f"alone, or the whole reply as \"reply\" (see the report's flags)")
    report = (REPORT_HTML.as_posix() if (root / REPORT_HTML).is_file()
              else f"{REPORT_HTML.as_posix()} (not built yet: dvc repro)")
    lines += [f"report: {report}",
              f"files: {METRICS_PATH.as_posix()} (dvc metrics show), "
              f"{BREAKDOWN_PATH.as_posix()}, {PROVENANCE_PATH.as_posix()} (rimo-eval audit)",
              "compare experiments (rimo-eval compare A B for paired tests):",
              f"  {EXP_SHOW_VIEW}"]
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace, params: Params | None) -> int:
    print(summary(Path("."), params), end="")
    return 0


__all__ = ["EXP_SHOW_VIEW", "has_remote", "main", "restore_hint", "summary"]
