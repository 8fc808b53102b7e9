"""The validate stage: raw upstream files -> checked, corrected item tables and a report.

Reads the JSONL and CSV of each track, checks every row against its JSON Schema and the
benchmark rules, cross-checks JSONL against CSV, and applies the versioned errata. Any finding
that no erratum covers fails the stage, and then nothing is written. Outputs are byte-stable:
no timestamps, sorted keys, rows sorted by problem_id.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from rimo_eval.artifacts.items import ITEM_SCHEMAS, ITEMS_DIR, items_path
from rimo_eval.artifacts.paths import RAW_DIR, UPSTREAM_FILES
from rimo_eval.artifacts.paths import VALIDATION_PATH as REPORT_PATH
from rimo_eval.errors import DataError
from rimo_eval.io.atomic import write_json
from rimo_eval.io.hashing import fingerprint
from rimo_eval.io.parquet import write_parquet
from rimo_eval.params.config import Params
from rimo_eval.rimo.text_quality import WARNING_RULES, text_warnings
from rimo_eval.rimo.tracks import TRACK_N, TRACKS
from rimo_eval.validate.errata import Corrected, Errata, apply_errata, load_errata, match_errata
from rimo_eval.validate.rawio import CsvTable, JsonlRow, RawFile, read_csv, read_jsonl, read_raw
from rimo_eval.validate.rules import (
    CSV_COLUMNS,
    EXPECTED_COUNTS,
    ID_LETTER_DOMAIN,
    MAX_PARTS,
    RULES,
    Finding,
    TrackCheck,
    compare,
    item_issues,
    normalise_text,
    schema_errors,
    show,
)

# 2: no ``ok`` field. It was always true: a run with a finding no erratum covers raises and
# writes nothing, so a report on disk is itself the pass; warnings (never blocking) are listed.
REPORT_VERSION = 2
SOURCES = UPSTREAM_FILES
__all__ = ["ValidationResult", "load_errata", "run", "validate"]  # load_errata: re-exported

# --- checking one track ------------------------------------------------------------------------


def check_track(track: str, files: dict[str, RawFile]) -> TrackCheck:
    jsonl_name, csv_name = SOURCES[track]
    check = TrackCheck(track)
    rows, check.findings = read_jsonl(files[jsonl_name], track)
    for row in rows:
        _check_row(check, jsonl_name, row)
    table, csv_findings = read_csv(files[csv_name], track, CSV_COLUMNS[track])
    check.findings += csv_findings
    check.findings += _count_findings(track, jsonl_name, len(rows))
    check.findings += _count_findings(track, csv_name, len(table.rows))
    _crosscheck(check, csv_name, table)
    return check


def _check_row(check: TrackCheck, name: str, row: JsonlRow) -> None:
    if row.record is None:
        return
    errors = schema_errors(check.track, row.record)
    issues = errors or item_issues(check.track, row.record)  # rules need schema-valid types
    check.findings += [Finding(name, row.line, check.track, row.problem_id, rule, msg, fld)
                       for rule, fld, msg in issues]
    pid = row.problem_id
    if pid is None or not isinstance(row.record, dict):
        return
    if pid in check.records:
        check.findings.append(Finding(name, row.line, check.track, pid, "id.unique",
                                      f"duplicate of line {check.records[pid][0]}"))
    else:
        check.records[pid] = (row.line, row.record)
        if errors:
            check.schema_invalid.add(pid)


def _count_findings(track: str, name: str, count: int) -> list[Finding]:
    expected = EXPECTED_COUNTS[track]
    if count == expected:
        return []
    return [Finding(name, None, track, None, "count.items",
                    f"{count} items, {track} has {expected}")]


def _crosscheck(check: TrackCheck, csv_name: str, table: CsvTable) -> None:
    """Field by field by problem_id; line endings and surrounding whitespace only count."""
    if "problem_id" not in table.header:
        return
    jsonl_name = SOURCES[check.track][0]
    fields = [f for f in CSV_COLUMNS[check.track][1:] if f in table.header]
    seen: dict[str, int] = {}
    for line, row in table.rows:
        pid = row["problem_id"]
        if pid in seen:
            check.findings.append(Finding(csv_name, line, check.track, pid, "id.unique",
                                          f"duplicate of line {seen[pid]}"))
            continue
        seen[pid] = line
        if pid not in check.records:
            check.findings.append(Finding(csv_name, line, check.track, pid,
                                          "crosscheck.missing_row", f"no row in {jsonl_name}"))
            continue
        jline, record = check.records[pid]
        for fld in (f for f in fields if f in record):
            kind = compare(record[fld], row[fld])
            if kind == "mismatch":
                check.findings.append(Finding(
                    csv_name, line, check.track, pid, "crosscheck.mismatch",
                    f"{fld}: {jsonl_name}:{jline} has {show(record[fld])}, "
                    f"{csv_name} has {show(row[fld])}", fld))
            elif kind is not None:
                check.normalised[fld][kind] += 1
    for pid, (jline, _) in check.records.items():
        if pid not in seen:
            check.findings.append(Finding(jsonl_name, jline, check.track, pid,
                                          "crosscheck.missing_row", f"no row in {csv_name}"))


# --- item tables -------------------------------------------------------------------------------


def build_rows(track: str, fixed: Corrected) -> list[dict[str, Any]]:
    """One row per schema-valid item, sorted by problem_id; the hash covers every column."""
    rows = []
    ungradable = fixed.ungradable
    for pid in sorted(fixed.records):
        if pid in fixed.schema_invalid:
            continue  # already a violation; its fields need not have the types rows need
        rec = fixed.records[pid]
        row = {"track": track, "problem_id": pid, "problem": normalise_text(rec["problem"]),
               "gradable": pid not in ungradable, "ungradable_reason": ungradable.get(pid)}
        row |= _n_fields(rec) if track == TRACK_N else _p_fields(rec)
        row["content_hash"] = fingerprint(row)
        rows.append(row)
    return rows


def _n_fields(rec: dict[str, Any]) -> dict[str, Any]:
    return {"domain": rec["type"], "number_of_parts": 1,
            "solution": normalise_text(rec["solution"]), "answer": rec["answer"].strip()}


def _p_fields(rec: dict[str, Any]) -> dict[str, Any]:
    n = min(max(rec["number_of_parts"], 0), MAX_PARTS)
    return {
        "domain": ID_LETTER_DOMAIN.get(rec["problem_id"][4]),
        "number_of_parts": rec["number_of_parts"],
        # Missing texts (only possible on ungradable items) are stored as "".
        "sub_problems": [normalise_text(rec[f"sub-problem{i}"] or "") for i in range(1, n + 1)],
        "sub_solutions": [normalise_text(rec[f"sub-solution{i}"] or "")
                          for i in range(1, n + 1)],
    }


def to_table(track: str, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ITEM_SCHEMAS[track])


def item_warnings(check: TrackCheck, rows: list[dict[str, Any]]) -> list[Finding]:
    """The data-quality warnings of the stored texts (rimo_eval.rimo.text_quality): one finding
    per item and rule, naming every field it occurs in and the first occurrence."""
    name = SOURCES[check.track][0]
    out = []
    for row in rows:
        pid = row["problem_id"]
        found: dict[str, list[tuple[str, str]]] = {}
        for fld, text in _texts(row):
            for rule, message in text_warnings(text):
                found.setdefault(rule, []).append((fld, message))
        for rule, hits in found.items():
            fields = ", ".join(f for f, _ in hits)
            out.append(Finding(name, check.records[pid][0], check.track, pid, rule,
                               f"{hits[0][0]} contains {hits[0][1]}" if len(hits) == 1 else
                               f"{fields}; {hits[0][0]} contains {hits[0][1]}", hits[0][0]))
    return out


def _texts(row: dict[str, Any]) -> list[tuple[str, str]]:
    texts = [(f, row[f]) for f in ("problem", "solution", "answer") if f in row]
    for key in ("sub_problems", "sub_solutions"):
        texts += [(f"{key}[{i}]", t) for i, t in enumerate(row.get(key, []))]
    return texts


def stored_changes(records: dict[str, tuple[int, dict[str, Any]]]) -> dict[str, dict[str, int]]:
    """How many JSONL text fields the stored form changed: CRLF->LF, and strip."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for _, rec in records.values():
        for fld, value in rec.items():
            if not isinstance(value, str) or fld == "problem_id":
                continue
            lf = value.replace("\r\n", "\n")
            if lf != value:
                counts[fld]["crlf"] += 1
            if lf.strip() != lf:
                counts[fld]["strip"] += 1
    return _plain(counts)


def _plain(counts: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    return {f: dict(sorted(c.items())) for f, c in sorted(counts.items()) if c}


# --- the whole stage ---------------------------------------------------------------------------


@dataclass
class ValidationResult:
    tables: dict[str, pa.Table]
    report: dict[str, Any]
    findings: list[Finding]  # everything found, covered or not
    violations: list[Finding]  # findings no erratum covers (they fail the stage)
    warnings: list[Finding]  # never blocking

    @property
    def ok(self) -> bool:
        return not self.violations

    def failure_message(self) -> str:
        lines = [f"validation failed: {len(self.violations)} finding(s) not covered by an "
                 "erratum:"]
        lines += [f"  {v.render()}" for v in self.violations]
        return "\n".join(lines)


def validate(raw_dir: Path, errata_path: Path) -> ValidationResult:
    """Read, check, correct: pure (writes nothing)."""
    errata = load_errata(Path(errata_path))
    files = read_raw(Path(raw_dir), [n for t in TRACKS for n in SOURCES[t]])
    checks = {t: check_track(t, files) for t in TRACKS}
    findings = sorted((f for c in checks.values() for f in c.findings), key=Finding.sort_key)
    matched, stale = match_errata(errata, findings)
    tables, rows_by_track, recheck = {}, {}, list(stale)
    for track, check in checks.items():
        fixed = apply_errata(check, errata)
        recheck += fixed.recheck
        rows_by_track[track] = build_rows(track, fixed)
        tables[track] = to_table(track, rows_by_track[track])
    matched += [(f, None) for f in sorted(recheck, key=Finding.sort_key)]
    violations = [f for f, e_id in matched if e_id is None]
    warnings = [w for t in TRACKS for w in item_warnings(checks[t], rows_by_track[t])]
    report = build_report(files, errata, checks, rows_by_track, matched, warnings)
    return ValidationResult(tables, report, [f for f, _ in matched], violations, warnings)


def build_report(files: dict[str, RawFile], errata: Errata, checks: dict[str, TrackCheck],
                 rows: dict[str, list[dict[str, Any]]],
                 matched: list[tuple[Finding, str | None]], warnings: list[Finding]
                 ) -> dict[str, Any]:
    by_rule: dict[str, Counter[str]] = defaultdict(Counter)
    for f, e_id in matched:
        by_rule[f.rule]["covered" if e_id else "violations"] += 1
    applied = {e_id for _, e_id in matched if e_id}
    return {
        "report_version": REPORT_VERSION,
        "inputs": {name: files[name].summary() for name in sorted(files)},
        "errata": {"file": errata.path.name, "sha256": errata.sha256,
                   "version": errata.version,
                   "applied": [e.summary() for e in errata.entries if e.id in applied]},
        "counts": {t: _counts(rows[t]) for t in TRACKS},
        "findings": [f.to_dict() | {"covered_by": e_id} for f, e_id in matched],
        "findings_by_rule": {r: {"covered": c["covered"], "violations": c["violations"]}
                             for r, c in sorted(by_rule.items())},
        "violations": [f.render() for f, e_id in matched if e_id is None],
        # JSONL/CSV differences that were only line endings or surrounding whitespace.
        "normalisations": {t: _plain(checks[t].normalised) for t in TRACKS},
        # JSONL text fields whose stored form differs (CRLF->LF, strip).
        "stored_text_changes": {t: stored_changes(checks[t].records) for t in TRACKS},
        "warnings": [w.to_dict() for w in warnings],
        "rules": RULES | WARNING_RULES,
    }


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    gradable = sum(r["gradable"] for r in rows)
    return {"items": len(rows), "gradable": gradable, "ungradable": len(rows) - gradable}


def run(params: Params, *, raw_dir: Path = RAW_DIR,
        items_dir: Path = ITEMS_DIR, report_path: Path = REPORT_PATH) -> None:
    """The DVC stage: write both item tables and the report, or nothing at all."""
    cfg = params.validate_
    result = validate(Path(raw_dir), Path(cfg.errata))
    if not result.ok:
        raise DataError(result.failure_message())
    for track in TRACKS:
        write_parquet(result.tables[track], items_path(track, items_dir))
    write_json(report_path, result.report)
