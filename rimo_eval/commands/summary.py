"""``rimo-eval summary``: what ``make repro`` ends with, in a dozen lines.

The headline metrics with their intervals, whether the run was a sample, which backend made the
predictions, and where the report and the metrics files are. Read through the run reader
(rimo_eval.run) from the run's artifacts alone, so it describes the run, not today's
params.yaml; a fresh clone, where nothing has run yet, is told so.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rimo_eval.artifacts import metrics_files, numbers
from rimo_eval.artifacts.paths import (
    BREAKDOWN_PATH,
    METRICS_PATH,
    PROVENANCE_PATH,
    REPORT_HTML,
    predictions_path,
    scores_path,
)
from rimo_eval.errors import DataError
from rimo_eval.params.config import Params
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.run.reader import RunReader
from rimo_eval.run.record import Run
from rimo_eval.run.recovery import REPRO, has_remote
from rimo_eval.run.revision import WORKSPACE, Revision
from rimo_eval.stats.floors import floor_line

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
                f"{sample.get('seed')})\n  the full run: dvc exp run --temp -S predict.limit=null")
    return f"run: full benchmark, {counts} items"


def backend_line(run: Run, tables: bool) -> str:
    """Backend and fingerprint as the provenance records them, and the run's model (the one
    every tool shows: reports/model.json's)."""
    seen = {f"{b.get('backend')} (fingerprint {str(b.get('fingerprint'))[:12]})"
            for b in (run.provenance.get("predictions") or {}).values()
            if isinstance(b, Mapping) and b.get("backend")}
    if not seen:
        return ("backend: none recorded (the predictions tables have no rows)" if tables else
                "backend: unknown (no predictions tables)")
    return f"backend: {', '.join(sorted(seen))}, model {run.model}"


def samples_line(metrics: Mapping[str, Any]) -> str | None:
    n, p = metrics.get(TRACK_N) or {}, metrics.get(TRACK_P) or {}
    if not (n.get("k") or p.get("k")):
        return None
    k = metrics_files.k_of(metrics)
    mean_n, mean_p = n.get("mean_at_k") or {}, p.get("mean_at_k") or {}
    return (f"k = {k} samples: RIMO-N mean@k {pct(mean_n.get('accuracy'))}, pass@k "
            f"{pct(n.get('pass_at_k'))}, maj@k {pct(n.get('maj_at_k'))}; RIMO-P mean@k prefix "
            f"{pct(mean_p.get('prefix_score'))}, pass@k strict {pct(p.get('pass_at_k'))}")


def summary(root: Path = Path("."), params: Params | None = None) -> str:
    """The workspace's run, read through the run reader. ``params`` is unused: the summary
    describes the run's own artifacts, not today's params.yaml."""
    if not (root / METRICS_PATH).is_file():
        raise DataError(f"{METRICS_PATH.as_posix()}: not found: {REPRO}")
    workspace = Revision(WORKSPACE, WORKSPACE, None)
    with RunReader(root) as reader:
        absent = reader.absent(workspace, [p(t) for t in TRACKS
                                           for p in (predictions_path, scores_path)])
        if absent and not any(c for _, c in absent) and not reader.experiment_names() \
                and not has_remote(root):
            # A fresh clone: the committed reports describe a run made elsewhere.
            return (f"nothing has run in this clone yet: {METRICS_PATH.as_posix()} is the "
                    f"committed copy of a run made elsewhere, and its tables are not here.\n"
                    f"  {REPRO}; then `rimo-eval summary` describes that run.\n")
        run = reader.open(workspace)
        lines = _lines(run, not absent)
        if absent:
            lines.insert(3, f"  its tables are not in the workspace: "
                            f"{reader.advice(workspace, all(c for _, c in absent))}")
    report = (REPORT_HTML.as_posix() if (root / REPORT_HTML).is_file()
              else f"{REPORT_HTML.as_posix()} (not built yet: dvc repro)")
    lines += [f"report: {report}",
              f"files: {METRICS_PATH.as_posix()} (dvc metrics show), "
              f"{BREAKDOWN_PATH.as_posix()}, {PROVENANCE_PATH.as_posix()} (rimo-eval audit)",
              "compare experiments (rimo-eval compare A B for paired tests):",
              f"  {EXP_SHOW_VIEW}"]
    return "\n".join(lines) + "\n"


def _lines(run: Run, tables: bool) -> list[str]:
    metrics = run.metrics
    n, p = metrics.get(TRACK_N) or {}, metrics.get(TRACK_P) or {}
    # predict.limit and sample_seed are in the provenance file (older runs: in metrics.json).
    spec = run.provenance.get("sample") or {}
    # First, the headline beside its floor: a constant "1" scores 21.8% on all of RIMO-N.
    floor = floor_line(TRACK_N, n.get("accuracy"),
                       (run.breakdown.get(TRACK_N) or {}).get("baselines"))
    lines = [floor, run_line({**(metrics.get("sample") or {}), **spec}),
             backend_line(run, tables)]
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
    return lines


def main(args: argparse.Namespace, params: Params | None) -> int:
    print(summary(Path("."), params), end="")
    return 0


__all__ = ["EXP_SHOW_VIEW", "backend_line", "main", "summary"]
