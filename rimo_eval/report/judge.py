"""The report's section "RIMO-P by judge (not the benchmark's primary protocol)".

Reads what the judge stage and ``rimo-eval judge --calibrate`` wrote (reports/judge.json,
reports/judge_calibration.json, data/judge/rimo_p.parquet) as plain files: the report does not
import the judge. Both tables are DataFrames; the notebook shows them with ``H.table``, which
escapes every cell (judge text is model output). With the judge off they are empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from rimo_eval.artifacts import judge_record
from rimo_eval.artifacts.numbers import pct
from rimo_eval.rimo.tracks import TRACK_P

SECTION = "RIMO-P by judge (not the benchmark's primary protocol)"
OFF = ("The judge is off (judge.enabled: false). RIMO-P is graded by exact match above, the "
       "benchmark's protocol.")
EXAMPLES = 5  # judged parts shown with their reasons
MAX_CANDIDATE = 600  # characters of candidate text per example


def _interval(block: Mapping[str, Any], key: str) -> str:
    ci = (block.get("ci") or {}).get(key) or {}
    if ci.get("low") is None or ci.get("high") is None:
        return "—"
    return f"[{pct(ci['low'])}, {pct(ci['high'])}]"


def _cut(text: Any, limit: int) -> str:
    text = "" if not isinstance(text, str) else text
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more)"


def summary_table(report: Mapping[str, Any], calibration: Mapping[str, Any]) -> pd.DataFrame:
    """Judge model, the three judge measures with intervals, counts, and the calibration."""
    columns = ["", "value", "interval / based on"]
    report = judge_record.read(report)  # judge.json's numbers-only layout, or an older one
    if not report.get("enabled"):
        return pd.DataFrame(columns=columns, dtype=object)
    j = (report.get(TRACK_P) or {}).get("judge") or {}
    rows = [("judge model", str(j.get("model", "—")), ""),
            ("judge fingerprint", str(j.get("fingerprint", "—"))[:12], "")]
    rows += [(name, pct(j.get(key)), _interval(j, key)) for name, key in (
        ("prefix score (upstream's measure)", "prefix_score"), ("strict", "strict"),
        ("sub-problem accuracy", "sub_problem_accuracy"))]
    rows += [("items / samples / parts judged",
              f"{j.get('n', '—')} / {j.get('samples', '—')} / {j.get('sub_problems', '—')}", ""),
             ("unparsable / errors / missing (counted incorrect)",
              f"{j.get('unparsable', '—')} / {j.get('errors', '—')} / {j.get('missing', '—')}",
              ""),
             ("agrees with exact match where it says correct",
              pct(j.get("agreement_with_exact_match")), f"{j.get('agreement_n', 0)} parts")]
    if calibration.get("calibrated"):
        same = calibration.get("fingerprint") == j.get("fingerprint")
        note = "" if same else "calibrated with another judge configuration"
        rows += [("calibration: true-positive rate (references)",
                  pct(calibration.get("true_positive_rate")),
                  f"{(calibration.get('references') or {}).get('parts', '—')} parts {note}"),
                 ("calibration: false-positive rate (swapped solutions)",
                  pct(calibration.get("false_positive_rate")),
                  f"{(calibration.get('swapped') or {}).get('parts', '—')} parts {note}")]
    else:
        rows.append(("calibration", "not run", "rimo-eval judge --calibrate"))
    return pd.DataFrame(rows, columns=columns, dtype=object)


def examples_table(table: pd.DataFrame, limit: int = EXAMPLES) -> pd.DataFrame:
    """A few judged parts with the judge's reasons: rejected ones first, in a stable order."""
    cols = ["problem_id", "sample", "part", "verdict", "reason", "candidate"]
    if table.empty:
        return pd.DataFrame(columns=cols)
    order = table.assign(_ok=table["verdict"] == "correct").sort_values(
        ["_ok", "problem_id", "sample", "part"], kind="stable")
    shown = order.head(limit)[cols].copy()
    shown["candidate"] = [_cut(t, MAX_CANDIDATE) for t in shown["candidate"]]
    return shown.reset_index(drop=True).astype(object)
