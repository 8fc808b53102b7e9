"""The report's tables as DataFrames: one builder per section, no HTML.

The notebook shows these frames (through rimo_eval.report.html, which escapes every cell) and a
reader can explore them further; which rows are shown and in what order is decided here, where
it is tested.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from rimo_eval.artifacts import flat_keys as dicts
from rimo_eval.artifacts.metrics_files import read_all
from rimo_eval.artifacts.numbers import pct
from rimo_eval.io.hashing import canonical_json, sha256_file
from rimo_eval.io.json_object import read_object as read_json
from rimo_eval.params.config import PREDICT_OUTPUT_KEYS
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.stats.floors import DECISION, OTHER, floor_line


def read_metrics(metrics_path: str | os.PathLike[str], breakdown_path: str | os.PathLike[str],
                 provenance_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The score stage's three files as one block (per-track ``ci``, breakdowns, provenance)."""
    for path in (metrics_path, breakdown_path, provenance_path):
        read_json(path)  # each must be there and a JSON object, with this module's error
    return read_all(metrics_path, breakdown_path, provenance_path)


def _ci(ci: Mapping[str, Any] | None, key: str) -> str:
    bounds = (ci or {}).get(key) or {}
    if bounds.get("low") is None or bounds.get("high") is None:
        return "—"
    return f"[{pct(bounds['low'])}, {pct(bounds['high'])}]"


def flatten(value: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Nested dicts as (dotted key, JSON scalar) rows, sorted: readable and order-stable."""
    return [(key, v if isinstance(v, str) else canonical_json(v))
            for key, v in dicts.flatten(value, sort=True, keep_empty=False).items()]


def headline_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """One row per headline metric with its 95% interval and the item count behind it."""
    n, p = metrics.get(TRACK_N) or {}, metrics.get(TRACK_P) or {}
    rows = [
        (TRACK_N, "accuracy", pct(n.get("accuracy")), _ci(n.get("ci"), "accuracy"),
         f"{n.get('correct', '—')} / {n.get('n', '—')} items"),
        (TRACK_P, "strict (all parts right)", pct(p.get("strict")), _ci(p.get("ci"), "strict"),
         f"{p.get('n', '—')} items"),
        (TRACK_P, "sub-problem accuracy", pct(p.get("sub_problem_accuracy")),
         _ci(p.get("ci"), "sub_problem_accuracy"), f"{p.get('sub_problems', '—')} sub-problems"),
        (TRACK_P, "prefix score", pct(p.get("prefix_score")), _ci(p.get("ci"), "prefix_score"),
         f"{p.get('n', '—')} items"),
    ]
    return pd.DataFrame(rows, columns=["Track", "Metric", "Value", "95% interval", "Based on"])


def floor_table(metrics: Mapping[str, Any]) -> tuple[str, pd.DataFrame]:
    """RIMO-N's floor line and its context rows (breakdown.json ``baselines``,
    ``by_answer_type``): the best constant answer on these items, then accuracy on the items
    whose gold is 0 or 1 (decision-like: a guess is worth half) and on the others. No rows for
    a run scored before them."""
    n = metrics.get(TRACK_N) or {}
    best = (n.get("baselines") or {}).get("best_constant") or {}
    types = n.get("by_answer_type") or {}
    rows = []
    if best.get("answer") is not None:
        rows.append((f'a constant "{best["answer"]}" (the best constant answer)',
                     pct(best.get("accuracy")), "—", f"{best.get('n')} items"))
    for key, label in ((DECISION, "items with gold 0 or 1"), (OTHER, "the other items")):
        cell = types.get(key)
        if cell:
            rows.append((label, pct(cell.get("accuracy")),
                         _ci({"c": {"low": cell.get("accuracy_ci_low"),
                                    "high": cell.get("accuracy_ci_high")}}, "c"),
                         f"{cell.get('right')} / {cell.get('n')} items"))
    frame = pd.DataFrame(rows, columns=["RIMO-N, context (not a metric)", "accuracy",
                                        "95% interval", "based on"])
    return floor_line(TRACK_N, n.get("accuracy"), n.get("baselines")), frame


def counts_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """Missing/error/ungradable counts: what the headline numbers count as wrong or leave out."""
    n, p = metrics.get(TRACK_N) or {}, metrics.get(TRACK_P) or {}
    rows = [(TRACK_N, n.get("n"), n.get("missing"), n.get("errors"), "—"),
            (TRACK_P, p.get("n"), p.get("missing"), p.get("errors"), p.get("ungradable"))]
    return pd.DataFrame(rows, columns=["Track", "Items", "Missing (wrong)", "Errors (wrong)",
                                       "Ungradable"], dtype=object)


def sorted_parts(by_parts: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``by_parts`` in numeric order of the part count ("10" after "9")."""
    keys = sorted(by_parts, key=lambda k: (int(k) if str(k).isdigit() else 10**9, str(k)))
    return [(str(k), by_parts[k] or {}) for k in keys]


def parts_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """The numbers behind the RIMO-P chart, one row per number of parts."""
    by_parts = (metrics.get(TRACK_P) or {}).get("by_parts") or {}
    rows = [(k, v.get("n"), pct(v.get("strict")), pct(v.get("sub_problem_accuracy")),
             pct(v.get("prefix_score"))) for k, v in sorted_parts(by_parts)]
    return pd.DataFrame(rows, columns=["Parts", "Items", "Strict", "Sub-problem accuracy",
                                       "Prefix score"], dtype=object)


# --- validation findings -------------------------------------------------------------------------

def _records(value: Any, columns: Sequence[str], **aliases: str) -> pd.DataFrame:
    """A list of dicts as a frame with exactly ``columns``; ``aliases`` maps column -> fallback
    key. Lists in cells are joined, anything but a dict row is skipped."""
    rows = []
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, Mapping):
            row = {c: entry.get(c, entry.get(aliases.get(c, ""))) for c in columns}
            rows.append({c: ", ".join(map(str, v)) if isinstance(v, list) else v
                         for c, v in row.items()})
    # object dtype: a column of ints with a None stays ints (float64 would print "12.000").
    return pd.DataFrame(rows, columns=list(columns), dtype=object)


def validation_tables(validation: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """Errata applied, normalisations, counts, findings by rule, findings and warnings.

    The validator's report is read defensively: missing keys give empty tables, and both
    ``{"errata": {"applied": [...]}}`` and ``{"errata_applied": [...]}`` are understood.
    """
    errata = validation.get("errata_applied", validation.get("errata")) or []
    if isinstance(errata, Mapping):
        errata = errata.get("applied") or []
    finding_cols = ["file", "line", "track", "problem_id", "rule", "field", "message", "erratum"]
    # JSONL/CSV differences normalised away, and changes to the stored JSONL text.
    norm = [("JSONL vs CSV", k, v) for k, v in flatten(validation.get("normalisations") or {})]
    norm += [("stored text", k, v)
             for k, v in flatten(validation.get("stored_text_changes") or {})]
    by_rule = validation.get("findings_by_rule") or {}
    return {
        "errata": _records(errata, ["id", "track", "problem_id", "action", "field", "covers",
                                    "reason"]),
        "normalisations": pd.DataFrame(norm, columns=["source", "normalisation", "count"]),
        "counts": pd.DataFrame(flatten(validation.get("counts") or {}),
                               columns=["count", "value"]),
        "by_rule": pd.DataFrame(
            [(r, c.get("covered"), c.get("violations"))
             for r, c in sorted(by_rule.items()) if isinstance(c, Mapping)],
            columns=["rule", "covered by an erratum", "not covered"], dtype=object),
        "findings": _records(validation.get("findings"), finding_cols, erratum="covered_by"),
        "warnings": _records(validation.get("warnings"), finding_cols[:-1]),
    }


# --- provenance ----------------------------------------------------------------------------------

def _distinct(frame: pd.DataFrame, column: str) -> str:
    values = sorted({str(v) for v in frame[column].dropna()}) if column in frame else []
    return ", ".join(values) if values else "—"


def _is_output_key(path: str) -> bool:
    return any(path == k or path.startswith(f"{k}.") for k in PREDICT_OUTPUT_KEYS)


def provenance_rows(params: Mapping[str, Any], files: Mapping[str, str | os.PathLike[str]],
                    predictions: Mapping[str, pd.DataFrame], git_commit: str,
                    validation: Mapping[str, Any] | None = None,
                    metrics: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Everything needed to reproduce the numbers: upstream pin, artifact hashes, backend, params.

    ``files`` maps a label (the path as configured) to the file to hash; ``predictions`` maps a
    track to its predictions frame. ``validation`` and ``metrics`` add what their producers
    recorded (inputs read, errata file, package versions), when present.
    """
    fetch = params.get("fetch") or {}
    rows: list[tuple[str, str, str]] = [
        ("upstream", "repo", str(fetch.get("repo", "—"))),
        ("upstream", "revision", str(fetch.get("revision", "—"))),
        ("upstream", "folder", str(fetch.get("folder", "—"))),
    ]
    rows += [("upstream sha256 (params)", str(name), str(digest))
             for name, digest in sorted((fetch.get("sha256") or {}).items())]
    # What the validator actually read, so a mismatch with the params pin is visible.
    validation = validation or {}
    inputs = validation.get("inputs")
    for name, info in sorted(inputs.items()) if isinstance(inputs, Mapping) else ():
        digest = info.get("sha256") if isinstance(info, Mapping) else info
        rows.append(("validated input sha256", str(name), str(digest)))
    errata = validation.get("errata")
    if isinstance(errata, Mapping) and errata.get("sha256"):
        rows.append(("errata", f"{errata.get('file', 'errata')} (version "
                     f"{errata.get('version', '?')}) sha256", str(errata["sha256"])))
    rows += [("artifact sha256", str(label), sha256_file(path)) for label, path in files.items()]
    for track, frame in predictions.items():
        rows += [(f"predictions {track}", "backend", _distinct(frame, "backend")),
                 (f"predictions {track}", "fingerprint", _distinct(frame, "fingerprint")),
                 (f"predictions {track}", "backend_params", _distinct(frame, "backend_params"))]
    # The predict keys that change outputs (the ones dvc.yaml declares), every score key.
    rows += [("params", f"predict.{k}", v) for k, v in flatten(params.get("predict") or {})
             if _is_output_key(f"predict.{k}")]
    rows += [("params", f"score.{k}", v) for k, v in flatten(params.get("score") or {})]
    rows.append(("code", "git commit", git_commit))
    # The score stage's own record: what it ran with (versions decide float results).
    recorded = (metrics or {}).get("provenance")
    if isinstance(recorded, Mapping):
        for key in ("params_fingerprint", "git", "packages"):
            if key in recorded:
                rows += [("score stage", k, v) for k, v in flatten({key: recorded[key]})]
    return pd.DataFrame(rows, columns=["section", "item", "value"])
