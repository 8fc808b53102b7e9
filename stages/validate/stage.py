"""The validate stage: raw upstream files -> checked, corrected item tables and a report.

Reads the JSONL and CSV of each track, checks every row against its JSON Schema and the
benchmark rules, cross-checks JSONL against CSV, and applies the versioned errata. Any finding
that no erratum covers fails the stage, and then nothing is written. Outputs are byte-stable:
no timestamps, sorted keys, rows sorted by problem_id.
"""

from __future__ import annotations

import copy
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from jsonschema import Draft202012Validator

from stages.core.artifacts import RAW_DIR, UPSTREAM_FILES
from stages.core.artifacts import VALIDATION_PATH as REPORT_PATH
from stages.core.atomic import write_json, write_with
from stages.core.config import load_params, section
from stages.core.errors import StageError
from stages.core.hashing import fingerprint, sha256_file
from stages.core.items import ITEM_SCHEMAS, ITEMS_DIR, items_path
from stages.core.tracks import TRACK_N, TRACK_P, TRACKS
from stages.validate.rawio import CsvTable, JsonlRow, RawFile, read_csv, read_jsonl, read_raw
from stages.validate.rules import (
    CSV_COLUMNS,
    EXPECTED_COUNTS,
    ID_LETTER_DOMAIN,
    MAX_PARTS,
    RULES,
    WARNING_RULES,
    Finding,
    compare,
    control_chars,
    item_issues,
    normalise_text,
    schema_errors,
    show,
)

REPORT_VERSION = 1
SOURCES = UPSTREAM_FILES

# --- errata ---------------------------------------------------------------------------------------

ACTIONS = ("set", "mark_ungradable")
# Rules about one item, which an erratum may resolve; file-level ones (counts, parse errors)
# and errata.unused never can.
COVERABLE = frozenset({
    "text.nonempty", "answer.integer", "domain.known", "domain.id_letter", "parts.range",
    "parts.count", "sub_solution.nonempty", "parts.nested", "crosscheck.mismatch",
    "crosscheck.missing_row", "json.duplicate_key",
})
SETTABLE = {TRACK_N: CSV_COLUMNS[TRACK_N][1:], TRACK_P: CSV_COLUMNS[TRACK_P][1:]}
_ERRATUM = {
    "type": "object",
    "required": ["id", "track", "problem_id", "covers", "action", "reason", "evidence"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": "^E[0-9]{3,}$"},
        "track": {"enum": list(TRACKS)},
        "problem_id": {"type": "string", "minLength": 1},
        "covers": {"type": "array", "minItems": 1, "uniqueItems": True,
                   "items": {"type": "string"}},
        "action": {"enum": list(ACTIONS)},
        "field": {"type": "string"},
        "value": {},
        "reason": {"type": "string", "minLength": 1},
        "evidence": {"type": "string", "minLength": 1},
    },
    # 'set' needs a field and a value; 'mark_ungradable' takes neither.
    "if": {"properties": {"action": {"const": "set"}}},
    "then": {"required": ["field", "value"]},
    "else": {"not": {"anyOf": [{"required": ["field"]}, {"required": ["value"]}]}},
}
ERRATA_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["version", "errata"],
    "additionalProperties": False,
    "properties": {
        "version": {"type": "integer", "minimum": 1},
        "errata": {"type": "array", "items": _ERRATUM},
    },
}


@dataclass(frozen=True)
class Erratum:
    """A versioned decision that resolves named findings of one item."""

    id: str
    track: str
    problem_id: str
    covers: tuple[str, ...]
    action: str
    reason: str
    evidence: str
    field: str | None = None
    value: Any = None
    line: int | None = None  # in the errata file, for messages

    def covers_finding(self, finding: Finding) -> bool:
        # A 'set' resolves findings about its own field only, not every finding of the item.
        return (finding.track == self.track and finding.problem_id == self.problem_id
                and finding.rule in self.covers
                and (self.action != "set" or finding.field == self.field))

    def summary(self) -> dict[str, Any]:
        out = {"id": self.id, "track": self.track, "problem_id": self.problem_id,
               "action": self.action, "covers": list(self.covers), "reason": self.reason}
        if self.action == "set":
            out |= {"field": self.field, "value": self.value}
        return out


@dataclass(frozen=True)
class Errata:
    path: Path
    version: int
    entries: tuple[Erratum, ...]
    sha256: str


def load_errata(path: Path) -> Errata:
    """Parse and check the errata file; any problem in it is a StageError (it is config)."""
    try:
        text = path.read_text(encoding="utf-8")
        doc = yaml.safe_load(text)
    except FileNotFoundError as exc:
        raise StageError(f"{path}: errata file not found") from exc
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise StageError(f"{path}: cannot read errata: {exc}") from exc
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '<top>'}: {e.message}"
                for e in Draft202012Validator(ERRATA_SCHEMA).iter_errors(doc)]
    if problems:
        raise StageError(f"{path}: invalid errata file:\n  " + "\n  ".join(sorted(problems)))
    lines = _entry_lines(text)
    entries = tuple(
        Erratum(id=e["id"], track=e["track"], problem_id=e["problem_id"],
                covers=tuple(e["covers"]), action=e["action"], reason=e["reason"].strip(),
                evidence=e["evidence"].strip(), field=e.get("field"), value=e.get("value"),
                line=lines[i] if i < len(lines) else None)
        for i, e in enumerate(doc["errata"]))
    problems = _errata_conflicts(entries)
    if problems:
        raise StageError(f"{path}: invalid errata file:\n  " + "\n  ".join(problems))
    return Errata(path, doc["version"], entries, sha256_file(path))


def _entry_lines(text: str) -> list[int]:
    """1-based line of each entry of the 'errata' list (YAML nodes keep their position)."""
    root = yaml.compose(text)
    for key, value in getattr(root, "value", []):
        if key.value == "errata" and isinstance(value, yaml.SequenceNode):
            return [node.start_mark.line + 1 for node in value.value]
    return []


def _errata_conflicts(entries: tuple[Erratum, ...]) -> list[str]:
    problems = []
    seen: Counter[Any] = Counter()
    for e in entries:
        where = f"{e.id} (line {e.line})"
        seen[e.id] += 1
        if seen[e.id] == 2:
            problems.append(f"{where}: id {e.id} is used more than once")
        unknown = [r for r in e.covers if r not in COVERABLE and not r.startswith("schema.")]
        if unknown:
            problems.append(f"{where}: covers {unknown}, which no erratum can resolve "
                            f"(item rules: {', '.join(sorted(COVERABLE))}, schema.*)")
        if e.action == "set" and e.field not in SETTABLE[e.track]:
            problems.append(f"{where}: field {e.field!r} cannot be set on {e.track} "
                            f"(one of {', '.join(SETTABLE[e.track])})")
        target = (e.track, e.problem_id, e.action, e.field)
        seen[target] += 1
        if seen[target] == 2:
            problems.append(f"{where}: a second '{e.action}' for {e.track} {e.problem_id}"
                            + (f" field {e.field}" if e.field else ""))
    return problems


# --- checking one track ------------------------------------------------------------------------


@dataclass
class TrackCheck:
    """What the raw files of one track say: first row per id, findings, normalisations."""

    track: str
    records: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    schema_invalid: set[str] = field(default_factory=set)  # ids whose first row fails it
    findings: list[Finding] = field(default_factory=list)
    # field -> kind ('crlf' | 'whitespace') -> count of JSONL/CSV differences normalised away
    normalised: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))


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


# --- errata against findings -------------------------------------------------------------------


def match_errata(errata: Errata, findings: list[Finding]
                 ) -> tuple[list[tuple[Finding, str | None]], list[Finding]]:
    """Each finding with the erratum covering it (the first in the file), plus a finding for
    every erratum rule that matched nothing: a stale erratum must not linger silently."""
    matched = [(f, next((e.id for e in errata.entries if e.covers_finding(f)), None))
               for f in findings]
    used = {(e_id, f.rule) for f, e_id in matched if e_id}
    stale = [
        Finding(errata.path.as_posix(), e.line, e.track, e.problem_id, "errata.unused",
                f"{e.id} covers {rule} but {e.track} {e.problem_id} has no such finding"
                + (f" on field {e.field}" if e.action == "set" else "")
                + " (stale erratum: remove it or update it)")
        for e in errata.entries for rule in e.covers if (e.id, rule) not in used
    ]
    return matched, stale


@dataclass
class Corrected:
    """A track after its errata: the rows to build items from, and what re-checking found."""

    records: dict[str, dict[str, Any]]
    ungradable: dict[str, str]  # problem_id -> reason
    schema_invalid: set[str]
    recheck: list[Finding]


def apply_errata(check: TrackCheck, errata: Errata) -> Corrected:
    """Apply every erratum of the track, then run the schema and item rules again on each
    item a 'set' changed: a correction must itself pass."""
    records = {pid: rec for pid, (_, rec) in check.records.items()}
    ungradable: dict[str, str] = {}
    changed: dict[str, list[str]] = defaultdict(list)
    for e in errata.entries:
        if e.track != check.track or e.problem_id not in records:
            continue
        if e.action == "mark_ungradable":
            ungradable[e.problem_id] = e.reason
        else:
            records[e.problem_id] = _set_field(records[e.problem_id], e.field or "", e.value)
            changed[e.problem_id].append(e.id)
    out = Corrected(records, ungradable, check.schema_invalid - set(changed), [])
    name = SOURCES[check.track][0]
    for pid in sorted(changed):
        errors = schema_errors(check.track, records[pid])
        if errors:
            out.schema_invalid.add(pid)
        if pid in ungradable:
            continue  # an ungradable item's remaining findings are covered by its erratum
        issues = errors or item_issues(check.track, records[pid])
        out.recheck += [Finding(name, check.records[pid][0], check.track, pid, rule,
                                f"after {', '.join(changed[pid])}: {msg}", fld)
                        for rule, fld, msg in issues]
    return out


def _set_field(record: dict[str, Any], fld: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(record)
    out[fld] = value
    # Keep the nested RIMO-P list in step with the flattened field it repeats.
    if fld.startswith("sub-") and isinstance(out.get("sub_problems"), list):
        key = "sub_problem" if fld.startswith("sub-problem") else "sub_solution"
        slot = int(fld[-1]) - 1
        if slot < len(out["sub_problems"]) and isinstance(out["sub_problems"][slot], dict):
            out["sub_problems"][slot][key] = value
    return out


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


def text_warnings(check: TrackCheck, rows: list[dict[str, Any]]) -> list[Finding]:
    name = SOURCES[check.track][0]
    out = []
    for row in rows:
        pid = row["problem_id"]
        for fld, text in _texts(row):
            found = control_chars(text)
            if found:
                out.append(Finding(name, check.records[pid][0], check.track, pid,
                                   "text.control_char", f"{fld} contains {found}", fld))
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
    warnings = [w for t in TRACKS for w in text_warnings(checks[t], rows_by_track[t])]
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
        "ok": all(e_id for _, e_id in matched),
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


def _write_parquet(path: Path, table: pa.Table) -> None:
    write_with(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def run(params: dict[str, Any], *, raw_dir: Path = RAW_DIR, items_dir: Path = ITEMS_DIR,
        report_path: Path = REPORT_PATH) -> None:
    """The DVC stage: write both item tables and the report, or nothing at all."""
    errata = section(params, "validate").get("errata")
    if not isinstance(errata, str) or not errata:
        raise StageError("params.yaml: validate.errata must be the path of the errata file")
    result = validate(Path(raw_dir), Path(errata))
    if not result.ok:
        raise StageError(result.failure_message())
    for track in TRACKS:
        _write_parquet(items_path(track, items_dir), result.tables[track])
    write_json(report_path, result.report)


def main() -> int:
    try:
        run(load_params())
    except StageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
