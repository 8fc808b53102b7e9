"""Small but realistic inputs for the report stage, laid out as in the project root.

Every file has the exact shape the upstream stages write: items and predictions use the project's
own Parquet schemas; scores, metrics and validation follow the documented contracts. The numbers
are mutually consistent (metrics agree with the score rows) so the report reads sensibly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from rimo_eval.artifacts.items import ITEM_SCHEMAS
from rimo_eval.artifacts.metrics_files import (
    POINTER_KEY,
    SAMPLE_KEY,
    pointer,
    sample_spec_of,
    split,
)
from rimo_eval.artifacts.predictions import PREDICTION_SCHEMAS
from rimo_eval.io.atomic import write_json
from rimo_eval.io.hashing import canonical_json, fingerprint, sha256_file
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.diagnostics import FLAGS_N, flags_n
from rimo_eval.score.stage import SCORE_SCHEMAS
from rimo_eval.score.years import by_year_band

# The RIMO-N wrong answer whose text must come out escaped, never as markup.
XSS_TEXT = "<script>alert(1)</script><img src=x onerror=alert(2)> **bold**"
# A validation finding carrying markup-like upstream text, also to be escaped.
FINDING_MESSAGE = "answer 'a<b>c' differs between CSV and JSONL"

LENIENT_ID = "2023g5"  # the RIMO-N row that only lenient match accepts

# The fixtures must track the score stage's real output schema, so take it from there.
SCORES_SCHEMAS = SCORE_SCHEMAS

# RIMO-N: (problem_id, domain, gold, status, prediction, raw_text or None, error or None)
_N_ROWS: list[tuple[str, str, str, str, str | None, str | None, str | None]] = [
    ("2023a1", "algebra", "50", "ok", "50", "The answer is \\boxed{50}.", None),
    ("2023a4", "algebra", "7", "ok", XSS_TEXT, XSS_TEXT, None),
    ("2023c1", "combinatorics", "2", "ok", "2", "So $m=2$.", None),
    ("2023c3", "combinatorics", "1011", "missing", None, None, "no prediction from backend"),
    ("2023g2", "geometry", "60", "ok", "60", "Angle is 60.", None),
    ("2023n1", "number theory", "4", "error", None, None, "HTTP 500 from model server"),
    ("2023n5", "number theory", "3", "ok", "3", "Hence 3.", None),
    # Wrong by exact match, right by lenient match, and cut off: a row the diagnostics list.
    (LENIENT_ID, "geometry", "120", "ok", "\\text{120}", "So \\boxed{\\text{120}} degrees, and",
     None),
]
# Finish reasons beyond the default "stop" (details carry one for every reply).
_N_FINISH = {LENIENT_ID: "length"}
# RIMO-P: (problem_id, domain, parts, gradable, matched, n_predicted)
_P_ROWS: list[tuple[str, str | None, int, bool, list[bool], int]] = [
    ("2022a2", "algebra", 1, True, [True], 1),
    ("2022c5", "combinatorics", 2, True, [False, True], 2),
    ("2022g4", "geometry", 3, True, [True, False, False], 3),
    ("2022n3", None, 2, True, [True, False], 2),
    ("2022n7", "number theory", 2, False, [], 0),
]

NO_RAW_TEXT = "2022g4"
REPLAY = {"path": "data/replay/example.jsonl"}


def _write(table_rows: list[dict[str, Any]], schema: pa.Schema, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(table_rows, schema=schema), path, compression="zstd")
    return path


def _params(sample: bool) -> dict[str, Any]:
    return {
        "fetch": {
            "repo": "ziye2chen/RIMO",
            "revision": "af7cb3d5e9b01fed7ccf23cdc6371762c1f1c6db",
            "folder": "RIMO",
            "url_template": "https://raw.githubusercontent.com/{repo}/{revision}/{folder}/{file}",
            "mirrors": ["../shared/rimo/upstream"],
            "timeout_s": 60,
            "sha256": {
                "RIMO-N.jsonl": "71a4d791210a954f03479c1541edd29e855c224fed786d45e44e48f7789fc08d",
                "RIMO-N.csv": "df56c28547f1abee17eb3e10d7ea57a85fbf262d9ec7080ae30a491147395873",
                "RIMO-P.jsonl": "a264d6e9ea957bbccc21cc7f4af9f84bbf16e85a9d8c9757f94a2a23da1c0a09",
                "RIMO-P.csv": "061c40044bfe806ee765927c1b6be8feb7cd2a3f54c50e69170592e392fc30df",
            },
        },
        "validate": {"errata": "data/errata.yaml"},
        "predict": {"backend": "replay", "limit": 7 if sample else None, "sample_seed": 0,
                    "constant": {"answer": "0", "solution": ""}, "replay": REPLAY},
        "score": {"bootstrap": {"samples": 1000, "seed": 0, "confidence": 0.95}},
        "report": {"worst_failures": 10},
    }


def _r(x: float) -> float:
    return round(x, 6)  # score writes every rate rounded to 6 decimals


def _metrics(sample: bool, flags: dict[str, int]) -> dict[str, Any]:
    """As rimo_eval/score/metrics.compute returns it, with the provenance block: the joined shape
    (rimo_eval/artifacts/metrics_files.py), which the fixture splits into the score stage's files.
    ``flags``: the flag counts of the score rows."""
    n_eval, p_eval = len(_N_ROWS), len(_P_ROWS)
    return {
        TRACK_N: {
            "accuracy": 0.5, "n": 8, "correct": 4, "missing": 1, "errors": 1,
            "by_domain": {"algebra": 0.5, "combinatorics": 0.5, "geometry": 0.5,
                          "number theory": 0.5},
            "by_domain_n": {"algebra": 2, "combinatorics": 2, "geometry": 2, "number theory": 2},
            # Wilson intervals per domain, as the score stage records them in breakdown.json.
            "by_domain_ci": {d: {"low": 0.094531, "high": 0.905469}
                             for d in ("algebra", "combinatorics", "geometry", "number theory")},
            # All eight from 2023: one band, computed as the score stage does.
            "by_year_band": by_year_band(np.full(8, 2023), np.arange(8) < 4, "accuracy", 0.95),
            "diagnostics": {**flags, "lenient_accuracy": _r(flags["lenient_match"] / 8)},
            "ci": {"accuracy": {"low": 0.25, "high": 0.75},
                   "diagnostics": {"lenient_accuracy": {"low": 0.375, "high": 0.875}}},
        },
        TRACK_P: {
            "n": 4, "strict": 0.25, "sub_problem_accuracy": 0.5, "prefix_score": _r(11 / 24),
            "sub_problems": 8, "missing": 0, "errors": 0, "ungradable": 1,
            "by_year_band": by_year_band(np.full(4, 2022), np.arange(4) < 1, "strict", 0.95),
            "by_parts": {  # with the per-group intervals the score stage writes beside them
                "1": {"n": 1, "strict": 1.0, "sub_problem_accuracy": 1.0, "prefix_score": 1.0,
                      "strict_ci_low": 0.206543, "strict_ci_high": 1.0,
                      "prefix_score_ci_low": 1.0, "prefix_score_ci_high": 1.0},
                "2": {"n": 2, "strict": 0.0, "sub_problem_accuracy": 0.5, "prefix_score": 0.25,
                      "strict_ci_low": 0.0, "strict_ci_high": 0.657628,
                      "prefix_score_ci_low": 0.0, "prefix_score_ci_high": 0.5},
                "3": {"n": 1, "strict": 0.0, "sub_problem_accuracy": _r(1 / 3),
                      "prefix_score": _r(1 / 3)},
            },
            "ci": {"strict": {"low": 0.0, "high": 0.75},
                   "sub_problem_accuracy": {"low": 0.125, "high": 0.875},
                   "prefix_score": {"low": 0.083333, "high": 0.833333}},
        },
        # rimo_eval/provenance.py's block (abridged: its input/output hashes are left out).
        "provenance": {
            "version": 1,
            "predictions": {t: {"backend": "replay", "fingerprint": "f" * 64}
                            for t in (TRACK_N, TRACK_P)},
            "params_fingerprint": "p" * 64,
            "git": {"commit": None, "dirty": None},
            "packages": {"python": "3.11.7", "rimo-eval": "0.1.0", "dvc": "3.67.1",
                         "numpy": "2.4.6", "pandas": "3.1.1", "pyarrow": "26.0.1"},
        },
        "sample": {
            "evaluated": {TRACK_N: n_eval, TRACK_P: p_eval},
            "total": {TRACK_N: 335, TRACK_P: 456} if sample else {TRACK_N: n_eval,
                                                                 TRACK_P: p_eval},
            "is_sample": sample,
            # What predict ran with, as score records it (params.yaml may say otherwise later).
            "limit": 7 if sample else None, "seed": 0,
        },
    }


def _validation() -> dict[str, Any]:
    """As rimo_eval/validate.py writes it (its build_report)."""
    sha = _params(True)["fetch"]["sha256"]
    finding = {"file": "RIMO-N.csv", "line": 12, "track": TRACK_N, "problem_id": "2023a4",
               "rule": "answer.mismatch", "message": FINDING_MESSAGE, "field": "answer"}
    warning = {"file": "RIMO-P.jsonl", "line": 5, "track": TRACK_P, "problem_id": "2022n7",
               "rule": "text.control_char", "message": "sub_problems[1] contains '\\x0c'",
               "field": "sub_problems[1]"}
    return {
        "report_version": 2,
        "inputs": {name: {"sha256": digest, "bytes": 1000, "bom": False,
                          "line_endings": {"lf": 10}} for name, digest in sorted(sha.items())},
        "errata": {"file": "errata.yaml", "sha256": "e" * 64, "version": 1, "applied": [
            {"id": "E001", "track": TRACK_N, "problem_id": "2023a4", "action": "set",
             "covers": ["answer.mismatch"], "reason": "CSV and JSONL disagree; the official "
             "solution gives 7", "field": "answer", "value": "7"},
        ]},
        "counts": {TRACK_N: {"items": 7, "gradable": 7, "ungradable": 0},
                   TRACK_P: {"items": 5, "gradable": 4, "ungradable": 1}},
        "findings": [finding | {"covered_by": "E001"}],
        "findings_by_rule": {"answer.mismatch": {"covered": 1, "violations": 0}},
        "violations": [],
        "normalisations": {TRACK_N: {"problem": {"whitespace": 3}},
                           TRACK_P: {"sub_solutions": {"crlf": 1}}},
        "stored_text_changes": {TRACK_N: {"solution": {"strip": 2}}, TRACK_P: {}},
        "warnings": [warning],
        "rules": {"answer.mismatch": "JSONL and CSV agree on the answer"},
    }


def make_report_inputs(root: Path, *, sample: bool = True) -> dict[str, Path]:
    """Write every report input under ``root``; return them keyed by notebook parameter name."""
    root = Path(root)
    identity = {"backend": "replay", "params": REPLAY}
    fp = fingerprint(identity)
    common = {"backend": "replay", "backend_params": canonical_json(REPLAY), "fingerprint": fp}

    items_n, preds_n, scores_n = [], [], []
    for pid, domain, gold, status, pred, raw, error in _N_ROWS:
        problem = f"Problem {pid}: find the value of $x$ with $x<{gold}+1$."
        h = fingerprint({"track": TRACK_N, "problem_id": pid, "problem": problem, "answer": gold})
        items_n.append({"track": TRACK_N, "problem_id": pid, "problem": problem,
                        "domain": domain, "number_of_parts": 1, "gradable": True,
                        "ungradable_reason": None, "content_hash": h,
                        "solution": f"Solution of {pid}.", "answer": gold})
        details = ({"raw_text": raw, "latency_s": 1.5,
                    "finish_reason": _N_FINISH.get(pid, "stop")} if raw is not None else {})
        preds_n.append({"track": TRACK_N, "problem_id": pid, "sample": 0, "item_hash": h,
                        "prediction": pred,
                        "status": status, "error": error, "details": canonical_json(details),
                        **common})
        correct = status == "ok" and pred == gold
        scores_n.append({"track": TRACK_N, "problem_id": pid, "sample": 0, "domain": domain,
                         "item_hash": h,
                         "status": status, "gold": gold, "prediction": pred,
                         "correct": correct,
                         # The score stage's own flags of these replies.
                         **flags_n(status, details, pred if status == "ok" else None, gold,
                                   correct)})

    items_p, preds_p, scores_p = [], [], []
    for pid, domain, parts, gradable, matched, n_pred in _P_ROWS:
        subs = [f"Part {i} of {pid}: prove it." for i in range(1, parts + 1)]
        sols = [f"Proof of part {i}." if gradable else None for i in range(1, parts + 1)]
        h = fingerprint({"track": TRACK_P, "problem_id": pid, "sub_problems": subs})
        reason = None if gradable else "missing reference sub-solution"
        items_p.append({"track": TRACK_P, "problem_id": pid, "problem": f"Problem {pid}.",
                        "domain": domain, "number_of_parts": parts, "gradable": gradable,
                        "ungradable_reason": reason, "content_hash": h,
                        "sub_problems": subs, "sub_solutions": [s or "" for s in sols]})
        answers = [f"My proof of part {i} of {pid}." for i in range(1, n_pred + 1)]
        # Per part, the reply as the engine records it; one item without any: the report
        # then shows the per-part answers.
        details = {} if pid == NO_RAW_TEXT else {
            "parts": [{"raw_text": a, "text": a, "finish_reason": "stop"} for a in answers],
            "finish_reason": "stop"}
        preds_p.append({"track": TRACK_P, "problem_id": pid, "sample": 0, "item_hash": h,
                        "prediction": answers, "status": "ok", "error": None,
                        "details": canonical_json(details), **common})
        prefix = next((i for i, m in enumerate(matched) if not m), len(matched))
        scores_p.append({
            "track": TRACK_P, "problem_id": pid, "sample": 0, "domain": domain, "item_hash": h,
            "number_of_parts": parts, "gradable": gradable, "ungradable_reason": reason,
            "status": "ok", "n_predicted": n_pred, "matched": matched,
            "n_matched": sum(matched), "prefix_len": prefix,
            "strict": gradable and all(matched) and len(matched) == parts,
            "prefix_score": prefix / parts if gradable else 0.0, "truncated": False,
        })

    paths = {
        "items_n_path": _write(items_n, ITEM_SCHEMAS[TRACK_N], root / "data/items/rimo_n.parquet"),
        "items_p_path": _write(items_p, ITEM_SCHEMAS[TRACK_P], root / "data/items/rimo_p.parquet"),
        "predictions_n_path": _write(preds_n, PREDICTION_SCHEMAS[TRACK_N],
                                     root / "data/predictions/rimo_n.parquet"),
        "predictions_p_path": _write(preds_p, PREDICTION_SCHEMAS[TRACK_P],
                                     root / "data/predictions/rimo_p.parquet"),
        "scores_n_path": _write(scores_n, SCORES_SCHEMAS[TRACK_N],
                                root / "data/scores/rimo_n.parquet"),
        "scores_p_path": _write(scores_p, SCORES_SCHEMAS[TRACK_P],
                                root / "data/scores/rimo_p.parquet"),
        "metrics_path": root / "reports/metrics.json",
        "breakdown_path": root / "reports/breakdown.json",
        "provenance_path": root / "reports/provenance.json",
        "validation_path": root / "reports/validation.json",
        "params_path": root / "params.yaml",
    }
    paths.update(_judge_inputs(root, items_p, preds_p, scores_p))
    full = _metrics(sample, {f: sum(bool(r[f]) for r in scores_n) for f in FLAGS_N})
    provenance = {**full.pop("provenance"), SAMPLE_KEY: sample_spec_of(full)}
    view, breakdown = split(full)
    write_json(paths["breakdown_path"], breakdown)
    write_json(paths["provenance_path"], provenance)
    view[POINTER_KEY] = pointer(sha256_file(paths["provenance_path"]))
    write_json(paths["metrics_path"], view, sort_keys=False)
    write_json(paths["validation_path"], _validation())
    paths["params_path"].write_text(yaml.safe_dump(_params(sample), sort_keys=False),
                                    encoding="utf-8")
    return paths


# A judge reason with markup, which the report must show escaped.
JUDGE_REASON_XSS = "<b>Gap</b> in step 2 <script>alert(3)</script>"


def _judge_inputs(root: Path, items: list[dict[str, Any]], preds: list[dict[str, Any]],
                  scores: list[dict[str, Any]]) -> dict[str, Path]:
    """The judge's table, report and calibration, as the judge stage writes them: the judge
    rejects every second part of each gradable item."""
    from rimo_eval.judge.stage import JUDGE_SCHEMA

    rows = []
    for item, pred, sc in zip(items, preds, scores, strict=True):
        if not item["gradable"]:
            continue
        for k in range(item["number_of_parts"]):
            ok = k % 2 == 0
            rows.append({
                "problem_id": item["problem_id"], "sample": 0, "part": k + 1,
                "number_of_parts": item["number_of_parts"], "item_hash": item["content_hash"],
                "candidate": pred["prediction"][k] if k < len(pred["prediction"]) else None,
                "exact_match": sc["matched"][k], "verdict": "correct" if ok else "incorrect",
                "reason": "Sound." if ok else JUDGE_REASON_XSS, "parse": "json",
                "raw_text": "{}", "request_sha256": "0" * 64, "error": None,
                "judge_model": "judge-model", "fingerprint": "f" * 64,
                "predictions_fingerprint": pred["fingerprint"]})
    block = {"model": "judge-model", "fingerprint": "f" * 64, "prefix_score": 0.4375,
             "strict": 0.25, "sub_problem_accuracy": 0.625, "n": 4, "samples": 1,
             "sub_problems": 8, "unparsable": 0, "errors": 0, "missing": 0,
             "agreement_with_exact_match": 0.75, "agreement_n": 4,
             "ci": {"prefix_score": {"low": 0.25, "high": 0.6875}}}
    paths = {"judge_path": root / "reports/judge.json",
             "judge_calibration_path": root / "reports/judge_calibration.json",
             "judge_table_path": _write(rows, JUDGE_SCHEMA, root / "data/judge/rimo_p.parquet")}
    write_json(paths["judge_path"], {"enabled": True, TRACK_P: {"judge": block}})
    write_json(paths["judge_calibration_path"], {
        "calibrated": True, "fingerprint": "f" * 64, "true_positive_rate": 0.9375,
        "false_positive_rate": 0.0625, "references": {"parts": 16}, "swapped": {"parts": 16}})
    return paths
