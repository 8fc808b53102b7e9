"""The report's run header, diagnostics and item selections, as DataFrames (no HTML).

Every item is in the browser (the view stage, reports/view/); the report links into it and
shows a short selection that explains the score: the RIMO-N rows the diagnostic flags mark,
the rows where exact and lenient match disagree, and for RIMO-P the reference sub-solution
next to the model's text, part by part. Model and problem text stays plain text here; the HTML
layer (rimo_eval.report.html) escapes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import pandas as pd

from rimo_eval.artifacts.flags import EXPLAINING_N, NOT_BARE
from rimo_eval.artifacts.metrics_files import k_of
from rimo_eval.artifacts.model_name import predictions_model
from rimo_eval.artifacts.numbers import absent, pct
from rimo_eval.artifacts.paths import REPORT_HTML, VIEW_DIR
from rimo_eval.artifacts.predictions import parse_details
from rimo_eval.chat.reply_flags import (
    ENGINE_FLAGS,
    REDACTED,
    UNICODE_REPAIRED,
    USAGE_DROPPED,
)
from rimo_eval.io.parquet import records
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

# The view stage's site, relative to reports/report.html.
VIEW_INDEX = (VIEW_DIR.relative_to(REPORT_HTML.parent) / "index.html").as_posix()
MAX_EXCERPT = 1200  # characters of model text per row: the head and the tail of longer ones
MAX_CELL = 600  # characters of a problem, sub-problem or reference per row
# Flags in the order they are listed; lenient_match is shown by its own table. The last ones
# (rimo_eval.chat.reply_flags) say what the engine did to a reply; scores tables from before them
# lack their columns, which then read False.
FLAGS = EXPLAINING_N
FLAG_MEANING = {
    "no_box": "no balanced \\boxed{...} in the reply",
    "empty_box": "the last box is empty, \\boxed{} (no answer)",
    "multiple_boxes": "the boxes hold different values",
    "truncated": "cut off by the length limit (finish reason length)",
    "gold_in_text": "the gold integer is in the answer text, the prediction is wrong",
    NOT_BARE: "a replayed prediction that is no bare answer (\\boxed{}, words, LaTeX)",
    "lenient_match": "right after MathArena-style normalisation",
    UNICODE_REPAIRED: "the reply held lone surrogates, each graded as U+FFFD",
    REDACTED: "the API key was cut out of the reply, which can change what is graded",
    USAGE_DROPPED: "a usage counter of the server was no token count: left out of the totals",
}


def view_href(track: str, problem_id: str) -> str:
    """The browser's page of one item; the id is percent-encoded, so the link cannot leave the
    site's fragment whatever the id holds."""
    return f"{VIEW_INDEX}#item={quote(track, safe='')}:{quote(str(problem_id), safe='')}"


def excerpt(text: str | None, limit: int = MAX_EXCERPT) -> str:
    """``text`` whole when short, else its head and its tail (where a cut-off reply or a final
    answer is) around a count of what was left out."""
    if not text:
        return ""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… ({len(text) - 2 * half} characters left out) …\n{text[-half:]}"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _distinct(values: Sequence[Any]) -> str:
    found = sorted({str(v) for v in values if isinstance(v, str) and v})
    return ", ".join(found) if found else "—"


# --- the run -------------------------------------------------------------------------------------

def run_rows(metrics: Mapping[str, Any], predictions: Mapping[str, pd.DataFrame],
             experiment: str = "", git_commit: str = "unknown") -> list[tuple[str, str]]:
    """(label, value) rows naming the run: backend, model, experiment, k, sample or full."""
    frames = [f for f in predictions.values() if len(f)]
    backends = _distinct([b for f in frames for b in f.get("backend", [])])
    # The one model name every tool shows (reports/model.json's: rimo_eval.artifacts.model_name).
    model = predictions_model(frames) or "—"
    k = k_of(metrics)
    sample = metrics.get("sample") or {}
    evaluated, total = sample.get("evaluated") or {}, sample.get("total") or {}
    counts = ", ".join(f"{evaluated.get(t, '?')} of {total.get(t, '?')} {t}"
                       for t in (TRACK_N, TRACK_P))
    scope = f"sample: {counts}" if sample.get("is_sample") else f"full benchmark: {counts}"
    return [("backend", backends), ("model", model),
            ("experiment", experiment or "— (not a DVC experiment run)"),
            ("samples per item (k)", str(k)), ("evaluated", scope),
            ("code", git_commit[:12] if git_commit != "unknown" else git_commit)]


# --- diagnostics ---------------------------------------------------------------------------------

def _interval(ci: Any) -> str:
    if not isinstance(ci, Mapping) or ci.get("low") is None or ci.get("high") is None:
        return "—"
    return f"[{pct(ci['low'])}, {pct(ci['high'])}]"


def has_flags(scores: pd.DataFrame) -> bool:
    """Scores written before the diagnostics have no flag columns (older runs)."""
    # not_bare came after the others: a table without it still has its flags.
    return all(f in scores.columns for f in (*FLAGS, "lenient_match")
               if f not in ENGINE_FLAGS and f != NOT_BARE)


def _flag(row: Mapping[str, Any], flag: str) -> bool:
    return bool(row.get(flag, False))


def flag_table(metrics: Mapping[str, Any], scores: pd.DataFrame) -> pd.DataFrame:
    """Each flag: its count over every reply (RIMO-N.diagnostics) and what it means."""
    block = (metrics.get(TRACK_N) or {}).get("diagnostics") or {}
    rows = len(scores)
    out = []
    for flag in (*FLAGS, "lenient_match"):
        count = block.get(flag)
        if count is None and flag in scores.columns:
            count = int(scores[flag].sum())
        out.append({"flag": flag, "replies": "—" if count is None else int(count),
                    "share": pct(count / rows) if count is not None and rows else "—",
                    "meaning": FLAG_MEANING[flag]})
    return pd.DataFrame(out, columns=["flag", "replies", "share", "meaning"], dtype=object)


def strict_lenient_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """Exact match (the benchmark's metric) beside lenient accuracy (a diagnostic)."""
    n = metrics.get(TRACK_N) or {}
    diag = n.get("diagnostics") or {}
    ci = n.get("ci") or {}
    rows = [("exact match (the benchmark's metric)", pct(n.get("accuracy")),
             _interval(ci.get("accuracy"))),
            ("lenient match (diagnostic, not the metric)", pct(diag.get("lenient_accuracy")),
             _interval((ci.get("diagnostics") or {}).get("lenient_accuracy")))]
    return pd.DataFrame(rows, columns=["RIMO-N accuracy", "value", "95% interval"])


def _item_texts(items: pd.DataFrame) -> dict[str, str]:
    return {str(r["problem_id"]): str(r.get("problem") or "") for r in items.to_dict("records")}


def _pred_rows(predictions: pd.DataFrame) -> dict[tuple[str, int], dict[str, Any]]:
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records(predictions):
        sample = r.get("sample", 0)
        out[(str(r["problem_id"]), 0 if absent(sample) else int(sample))] = r
    return out


def answer_text(pred: Mapping[str, Any]) -> str:
    """The reply as the extractor read it (reasoning apart), else the raw reply, the error or
    the prediction: what the model actually said."""
    details = parse_details(pred.get("details"))
    for key in ("text", "raw_text"):
        text = _str(details.get(key))
        if text:
            return text
    error = pred.get("error")
    if isinstance(error, str) and error:
        return f"[{pred.get('status')}] {error}"
    return _str(pred.get("prediction")) or ""


def _n_row(r: Mapping[str, Any], pred: Mapping[str, Any], problems: Mapping[str, str],
           flags: str) -> dict[str, Any]:
    pid = str(r["problem_id"])
    finish = parse_details(pred.get("details")).get("finish_reason")
    return {"problem_id": pid, "view": view_href(TRACK_N, pid), "sample": int(r["sample"]),
            "flags": flags, "gold": r.get("gold"),
            "prediction": "" if absent(r.get("prediction")) else r.get("prediction"),
            "finish": finish if isinstance(finish, str) else "—",
            "problem": excerpt(problems.get(pid), MAX_CELL),
            "model text": excerpt(answer_text(pred))}


N_COLUMNS = ["problem_id", "view", "sample", "flags", "gold", "prediction", "finish", "problem",
             "model text"]


def lenient_differs(scores: pd.DataFrame, predictions: pd.DataFrame, items: pd.DataFrame,
                    limit: int) -> pd.DataFrame:
    """Rows that exact match calls wrong and lenient match right, each with its text."""
    if not has_flags(scores):
        return pd.DataFrame(columns=N_COLUMNS)
    preds, problems = _pred_rows(predictions), _item_texts(items)
    rows = [r for r in records(scores)
            if bool(r["lenient_match"]) != bool(r["correct"])]
    rows.sort(key=lambda r: (str(r["problem_id"]), int(r["sample"])))
    return pd.DataFrame([_n_row(r, preds.get((str(r["problem_id"]), int(r["sample"])), {}),
                                problems, "exact ✗, lenient ✓" if r["lenient_match"]
                                else "exact ✓, lenient ✗")
                         for r in rows[:max(limit, 0)]], columns=N_COLUMNS)


def flagged(scores: pd.DataFrame, predictions: pd.DataFrame, items: pd.DataFrame,
            limit: int) -> tuple[pd.DataFrame, int]:
    """Wrong rows that a flag explains, the most telling first (``FLAGS`` order: a gold in the
    text, an empty box, boxes that disagree, no box, a cut-off reply, a repaired or redacted
    reply), at most ``limit`` and
    one row per flag before a second; returns them and how many wrong rows are flagged."""
    if not has_flags(scores):
        return pd.DataFrame(columns=N_COLUMNS), 0
    preds, problems = _pred_rows(predictions), _item_texts(items)
    wrong = [r for r in records(scores)
             if not bool(r["correct"]) and any(_flag(r, f) for f in FLAGS)]
    wrong.sort(key=lambda r: (str(r["problem_id"]), int(r["sample"])))
    # Round robin over the flags, so a run with 300 cut-off replies still shows its empty box.
    queues = {f: [r for r in wrong if _flag(r, f)] for f in FLAGS}
    chosen: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()
    while len(chosen) < max(limit, 0) and any(queues.values()):
        for flag in FLAGS:
            while queues[flag]:
                r = queues[flag].pop(0)
                key = (str(r["problem_id"]), int(r["sample"]))
                if key not in seen:
                    seen.add(key)
                    chosen.append(r)
                    break
            if len(chosen) >= limit:
                break
    chosen.sort(key=lambda r: (str(r["problem_id"]), int(r["sample"])))
    frame = pd.DataFrame([_n_row(r, preds.get((str(r["problem_id"]), int(r["sample"])), {}),
                                 problems, ", ".join(f for f in FLAGS if _flag(r, f)))
                          for r in chosen], columns=N_COLUMNS)
    return frame, len(wrong)


# --- RIMO-P: the reference next to the model's text ----------------------------------------------

P_COLUMNS = ["problem_id", "view", "part", "matched", "finish", "sub-problem",
             "reference sub-solution", "model's text"]


def _part_texts(pred: Mapping[str, Any], parts: int) -> list[tuple[str, str]]:
    """Per part, what the model wrote (the part's reply in details.parts, else its answer)
    and the part's finish reason ("—" when not recorded)."""
    details = parse_details(pred.get("details"))
    replies = [p for p in details.get("parts") or [] if isinstance(p, Mapping)]
    answers = pred.get("prediction")
    answers = [] if answers is None or isinstance(answers, float | str) else list(answers)
    out = []
    for k in range(parts):
        reply = replies[k] if k < len(replies) else {}
        text = _str(reply.get("text")) or _str(reply.get("raw_text"))
        if not text and k < len(answers):
            text = str(answers[k])
        out.append((text or "", _str(reply.get("finish_reason")) or "—"))
    if not any(text for text, _finish in out):  # an item-level reply only, or an error
        out[0:1] = [(answer_text(pred), out[0][1] if out else "—")]
    return out


def parts_side_by_side(scores: pd.DataFrame, predictions: pd.DataFrame, items: pd.DataFrame,
                       limit: int) -> pd.DataFrame:
    """Up to ``limit`` gradable items not fully right (lowest prefix score first), one row per
    part: the sub-problem, the reference sub-solution and the model's text side by side."""
    preds = _pred_rows(predictions)
    by_id = {str(r["problem_id"]): r for r in records(items)}
    bad = [r for r in records(scores)
           if bool(r["gradable"]) and not bool(r["strict"]) and int(r.get("sample", 0)) == 0]
    bad.sort(key=lambda r: (float(r["prefix_score"]), int(r["n_matched"]), str(r["problem_id"])))
    rows = []
    for r in bad[:max(limit, 0)]:
        pid = str(r["problem_id"])
        item = by_id.get(pid, {})
        subs = list(s if (s := item.get("sub_problems")) is not None else [])
        refs = list(s if (s := item.get("sub_solutions")) is not None else [])
        parts = int(r["number_of_parts"])
        matched = list(m if (m := r.get("matched")) is not None else [])
        texts = _part_texts(preds.get((pid, 0), {}), parts)
        for k in range(parts):
            rows.append({
                "problem_id": pid, "view": view_href(TRACK_P, pid), "part": f"{k + 1}/{parts}",
                "matched": "✓" if k < len(matched) and matched[k] else "✗",
                "finish": texts[k][1],
                "sub-problem": excerpt(str(subs[k]) if k < len(subs) else "", MAX_CELL),
                "reference sub-solution": excerpt(str(refs[k]) if k < len(refs) else "",
                                                  MAX_CELL),
                "model's text": excerpt(texts[k][0], MAX_CELL)})
    return pd.DataFrame(rows, columns=P_COLUMNS)


__all__ = ["FLAGS", "FLAG_MEANING", "N_COLUMNS", "P_COLUMNS", "VIEW_INDEX", "answer_text",
           "excerpt", "flag_table", "flagged", "has_flags", "lenient_differs",
           "parts_side_by_side", "run_rows", "strict_lenient_table", "view_href"]
