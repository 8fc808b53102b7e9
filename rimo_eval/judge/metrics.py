"""Judge metrics from the judge table, under their own keys (``RIMO-P.judge.*``).

The same three measures as exact match, computed from verdicts instead: ``prefix_score`` (the
upstream measure: consecutive parts judged correct, from the first, over parts), ``strict`` (every
part judged correct) and ``sub_problem_accuracy``. ``unparsable``, ``errors`` and ``missing``
verdicts count as incorrect and are reported. With k samples per item, each sample is judged and
an item's score is the mean over its samples. Intervals: as the score stage, Wilson's interval of
the sum over items (rimo_eval.stats.means; Wilson's own for strict at one sample per item), at
``score.bootstrap.confidence``.

Also used by ``rimo-eval audit`` (recompute from the table) and ``rimo-eval compare``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pandas as pd

from rimo_eval.artifacts import judge_record
from rimo_eval.artifacts.numbers import rounded
from rimo_eval.judge.parse import CORRECT, UNPARSABLE
from rimo_eval.rimo.grading import leading_matches
from rimo_eval.rimo.tracks import TRACK_P
from rimo_eval.stats import mean_interval, ratio

ERROR = "error"  # the request failed after its retries
MISSING = "missing"  # no candidate text for the part: not sent, incorrect (as upstream)
RATES = ("prefix_score", "strict", "sub_problem_accuracy")
COUNTS = ("n", "samples", "sub_problems", "unparsable", "errors", "missing")


def proof_scores(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (item, sample): parts, parts judged correct, the correct prefix, strict."""
    rows = []
    ordered = table.sort_values(["problem_id", "sample", "part"], kind="stable")
    for (pid, sample), group in ordered.groupby(["problem_id", "sample"], sort=True):
        flags = [v == CORRECT for v in group["verdict"]]
        parts = int(group["number_of_parts"].iloc[0])
        prefix = leading_matches(flags)
        rows.append({"problem_id": pid, "sample": int(cast(int, sample)), "parts": parts,
                     "correct": sum(flags), "prefix_len": prefix,
                     "strict": parts > 0 and prefix == parts,
                     "prefix_score": prefix / parts if parts else 0.0})
    return pd.DataFrame(rows, columns=["problem_id", "sample", "parts", "correct", "prefix_len",
                                       "strict", "prefix_score"])


def judge_metrics(table: pd.DataFrame, boot: Mapping[str, Any]) -> dict[str, Any]:
    """The ``RIMO-P.judge`` block (without model and fingerprint, which the stage adds)."""
    proofs = proof_scores(table)
    per_item = proofs.groupby("problem_id", sort=True).agg(
        strict=("strict", "mean"), prefix_score=("prefix_score", "mean"),
        correct=("correct", "sum"), parts=("parts", "sum"))
    strict = per_item["strict"].to_numpy(dtype=float)
    prefix = per_item["prefix_score"].to_numpy(dtype=float)
    correct = per_item["correct"].to_numpy(dtype=float)
    parts = per_item["parts"].to_numpy(dtype=float)
    n = len(per_item)
    agree = table[table["exact_match"].fillna(False).astype(bool)]
    # As the score stage: means of per-item fractions get Wilson's interval of the sum, which
    # is Wilson's own for strict over items with one sample each (a proportion).
    confidence = float(boot["confidence"])
    ci = {"prefix_score": mean_interval(prefix, None, confidence),
          "strict": mean_interval(strict, None, confidence),
          "sub_problem_accuracy": mean_interval(correct, parts, confidence)}
    return {
        "prefix_score": ratio(prefix.sum(), n),
        "strict": ratio(strict.sum(), n),
        "sub_problem_accuracy": ratio(correct.sum(), parts.sum()),
        "n": n,
        "samples": int(proofs.groupby("problem_id")["sample"].nunique().max()) if n else 0,
        "sub_problems": len(table),
        "unparsable": int((table["verdict"] == UNPARSABLE).sum()),
        "errors": int((table["verdict"] == ERROR).sum()),
        "missing": int((table["verdict"] == MISSING).sum()),
        # On the parts exact match calls correct: how often the judge agrees.
        "agreement_with_exact_match": ratio((agree["verdict"] == CORRECT).sum(), len(agree)),
        "agreement_n": len(agree),
        "ci": ci,
    }


def judge_block(report: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``RIMO-P.judge`` block of a judge.json (either layout:
    rimo_eval.artifacts.judge_record), or None when the judge did not run."""
    report = judge_record.read(report)
    block = (report.get(TRACK_P) or {}).get("judge")
    return block if isinstance(block, Mapping) and report.get("enabled") else None


def recompute_mismatches(table: pd.DataFrame, report: Mapping[str, Any],
                         boot: Mapping[str, Any]) -> list[str]:
    """Keys of the recorded judge metrics that the judge table does not reproduce (audit)."""
    recorded = judge_block(report)
    if recorded is None:
        return [] if not len(table) else ["judge table has rows but judge.json says disabled"]
    fresh = judge_metrics(table, boot)
    bad = [k for k in (*RATES, *COUNTS, "agreement_with_exact_match", "agreement_n")
           if recorded.get(k) != fresh[k]]
    bad += [f"ci.{k}" for k in RATES if (recorded.get("ci") or {}).get(k) != fresh["ci"][k]]
    fps = sorted(set(table["fingerprint"]))
    if len(table) and fps != [recorded.get("fingerprint")]:
        bad.append("fingerprint")
    return bad


def compare_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``RIMO-P.judge.*`` rows for ``rimo-eval compare`` (its metric-row shape) when both
    judge.json files have judge metrics, else none. No paired interval: the judge is not
    paired per item here, and a different judge model makes the two sides incomparable."""
    ja, jb = judge_block(a), judge_block(b)
    if ja is None or jb is None:
        return []
    rows = []
    for key in (*RATES, "agreement_with_exact_match", *COUNTS, "model", "fingerprint"):
        va: Any = ja.get(key)  # JSON values, numbers or not
        vb: Any = jb.get(key)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (va, vb))
        rows.append({"name": f"{TRACK_P}.judge.{key}", "a": va, "b": vb,
                     "delta": rounded(vb - va) if numbers and key not in COUNTS
                     else (vb - va if numbers else None),
                     "rate": key in RATES or key == "agreement_with_exact_match",
                     "ci": None})
    return rows


def audit_check(root: Path, table: Path, report: Path, boot: Mapping[str, Any]
                ) -> tuple[bool, str] | None:
    """``rimo-eval audit``: do the judge metrics recompute from the judge table? ``table`` and
    ``report`` are relative to ``root`` and named so in the message (the root may be a
    temporary checkout). None when the run has no judge record (older runs)."""
    report_shown, table_shown = report.as_posix(), table.as_posix()
    if not (root / report).is_file():
        return None
    recorded = json.loads((root / report).read_text(encoding="utf-8"))
    if not (root / table).is_file():
        return False, f"{report_shown}: {table_shown} is missing"
    bad = recompute_mismatches(pd.read_parquet(root / table), recorded, boot)
    if bad:
        return False, f"{report_shown}: {', '.join(bad)} do not recompute from {table_shown}"
    what = "judge metrics recompute" if judge_block(recorded) else "judge disabled, table empty"
    return True, f"{report_shown}: {what} from {table_shown}"
