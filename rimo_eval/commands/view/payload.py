"""One item's payload for the site: its texts, and each run's samples with their outcome codes.

Outcome codes, one character per sample, shared with app.js:
RIMO-N ``R`` right, ``W`` wrong, ``T`` wrong and truncated (finish reason ``length``),
``M`` missing, ``E`` error; RIMO-P ``S`` strictly right, ``0``-``4`` parts matched, ``U``
ungradable, ``M``, ``E``; ``-`` not evaluated in that run (a sample run, say).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from rimo_eval.artifacts.flags import FLAGS_N
from rimo_eval.commands.view.load import Run
from rimo_eval.commands.view.packing import source
from rimo_eval.commands.view.packing import text as shown
from rimo_eval.commands.view.years import item_year
from rimo_eval.io.parquet import records
from rimo_eval.rimo.text_quality import WARNING_RULES, text_warnings
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

# The score stage's diagnostic flags (one per row), where the scores table has them; RIMO-P's
# (FLAGS_P) are among them.
FLAGS = FLAGS_N


def _value(x: Any) -> Any:
    if x is None or (isinstance(x, float) and x != x):
        return None
    if hasattr(x, "item"):
        return x.item()
    return x


def _text(x: Any) -> str:
    x = _value(x)
    return "" if x is None else str(x)


def _list(x: Any) -> list[Any]:
    x = _value(x) if not hasattr(x, "__len__") or isinstance(x, str) else x
    return [] if x is None or isinstance(x, str) else list(x)


def item_key(track: str, pid: str) -> str:
    return f"{track}:{pid}"


# --- outcomes -----------------------------------------------------------------------------------


def _flags(row: dict[str, Any], details: dict[str, Any], present: Sequence[str]) -> list[str]:
    out = [f for f in present if bool(_value(row.get(f)))]
    if "truncated" not in present and _finish(details) == "length":
        out.append("truncated")  # older scores tables: read the finish reason itself
    return sorted(out, key=FLAGS.index)


def _finish(details: dict[str, Any]) -> str:
    return _text(details.get("finish_reason"))


def outcome(track: str, row: dict[str, Any], flags: Iterable[str]) -> str:
    status = _text(row.get("status"))
    if status == "pending":  # a partial view's sample with no reply yet: not evaluated
        return "-"
    if track == TRACK_P and not bool(row.get("gradable")):
        return "U"
    if status == "error":
        return "E"
    if status == "missing":
        return "M"
    if track == TRACK_N:
        if bool(row.get("correct")):
            return "R"
        return "T" if "truncated" in flags else "W"
    return "S" if bool(row.get("strict")) else str(min(int(row.get("n_matched") or 0), 9))


def rows_by_item(scores: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    frame = scores if "sample" in scores.columns else scores.assign(sample=0)
    for r in records(frame.sort_values(["problem_id", "sample"], kind="stable")):
        out.setdefault(str(r["problem_id"]), []).append(r)
    return out


# --- item payloads ------------------------------------------------------------------------------


def _usage(details: dict[str, Any]) -> dict[str, Any]:
    usage = details.get("usage")
    return {k: v for k, v in sorted(usage.items()) if isinstance(v, int | float)} \
        if isinstance(usage, dict) else {}


def _sample_n(row: dict[str, Any], details: dict[str, Any], present: Sequence[str]
              ) -> dict[str, Any]:
    flags = _flags(row, details, present)
    reply = details.get("text") if isinstance(details.get("text"), str) else \
        details.get("raw_text")
    return {"s": int(row["sample"]), "status": _text(row.get("status")),
            "error": _text(details.get("error")) or None, "pred": _value(row.get("prediction")),
            "ok": bool(row.get("correct")), "o": outcome(TRACK_N, row, flags), "flags": flags,
            "text": shown(reply if isinstance(reply, str) else None),
            "reasoning": shown(_text(details.get("reasoning"))),
            "usage": _usage(details), "finish": _finish(details) or None,
            "extraction": _text(details.get("extraction")) or None}


def _sample_p(row: dict[str, Any], details: dict[str, Any], prediction: list[str],
              judged: dict[int, dict[str, Any]], present: Sequence[str]) -> dict[str, Any]:
    flags = _flags(row, details, present)
    parts_d = found if isinstance(found := details.get("parts"), list) else []
    matched = [bool(m) for m in _list(row.get("matched"))]
    count = max(int(row.get("number_of_parts") or 0), len(prediction))
    parts = []
    for i in range(count):
        d = parts_d[i] if i < len(parts_d) and isinstance(parts_d[i], dict) else {}
        j = judged.get(i + 1)
        parts.append({"text": shown(prediction[i]) if i < len(prediction) else None,
                      "m": matched[i] if i < len(matched) else None,
                      "finish": _finish(d) or None,
                      "reasoning": shown(_text(d.get("reasoning"))),
                      "judge": None if j is None else {
                          "verdict": _text(j.get("verdict")),
                          "reason": shown(_text(j.get("reason")))}})
    return {"s": int(row["sample"]), "status": _text(row.get("status")),
            "error": _text(details.get("error")) or None, "o": outcome(TRACK_P, row, flags),
            "strict": bool(row.get("strict")), "n_matched": int(row.get("n_matched") or 0),
            "prefix": int(row.get("prefix_len") or 0), "flags": flags, "parts": parts,
            "usage": _usage(details), "finish": _finish(details) or None}


def item_texts(track: str, item: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The item's own texts as the page shows them, and its data-quality warnings. A text that
    a check of rimo_eval.rimo.text_quality flags (doubled backslashes, control characters) is
    shown as the model received it: its source, not rendered math."""
    found: dict[str, list[str]] = {}

    def show(label: str, value: str) -> Any:
        hits = text_warnings(value)
        for rule, _message in hits:
            found.setdefault(rule, []).append(label)
        return source(value) if hits else shown(value)

    out: dict[str, Any] = {"problem": show("problem", _text(item.get("problem")))}
    if track == TRACK_N:
        out["solution"] = show("reference solution", _text(item.get("solution")))
    else:
        for key, label in (("sub_problems", "sub-problem"), ("sub_solutions", "sub-solution")):
            out[key] = [show(f"{label} {i + 1}", str(x))
                        for i, x in enumerate(_list(item.get(key)))]
    return out, [{"rule": rule, "fields": found[rule]} for rule in WARNING_RULES if rule in found]


def item_payload(track: str, item: dict[str, Any], runs: Sequence[Run],
                 rows: Sequence[dict[str, list[dict[str, Any]]]],
                 preds: Sequence[dict[tuple[str, int], Any]],
                 errors: Sequence[dict[tuple[str, int], Any]],
                 judges: Sequence[dict[tuple[str, int], dict[int, dict[str, Any]]]]
                 ) -> dict[str, Any]:
    pid = str(item["problem_id"])
    out: dict[str, Any] = {
        "key": item_key(track, pid), "track": track, "id": pid,
        "domain": _text(item.get("domain")), "parts": int(item["number_of_parts"]), "runs": [],
        **item_year(pid)}
    texts, warnings = item_texts(track, item)
    out |= texts
    if warnings:
        out["data_warnings"] = warnings
    if track == TRACK_N:
        out["gold"] = _text(item.get("answer"))
    else:
        out["gradable"] = bool(item.get("gradable"))
        out["ungradable_reason"] = _text(item.get("ungradable_reason")) or None
    for i, run in enumerate(runs):
        present = [f for f in FLAGS if f in run.scores[track].columns]
        samples = []
        for r in rows[i].get(pid, []):
            details = run.sample_details(track, pid, int(r["sample"]))
            error = errors[i].get((pid, int(r["sample"])))
            if error and "error" not in details:
                details = {**details, "error": error}  # the predictions table's reason
            if track == TRACK_N:
                samples.append(_sample_n(r, details, present))
            else:
                prediction = [str(x) for x in _list(preds[i].get((pid, int(r["sample"]))))]
                samples.append(_sample_p(r, details, prediction,
                                         judges[i].get((pid, int(r["sample"])), {}), present))
        out["runs"].append(samples or None)
    return out


__all__ = ["FLAGS", "item_key", "item_payload", "item_texts", "outcome", "rows_by_item"]
