"""Errata: versioned decisions that change an item, each with a reason and evidence.

Loading (schema, conflicts, line numbers for messages), matching against the findings of the
checks (a stale erratum is itself a finding) and applying them (a corrected item is checked
again). Any problem in the errata file is a ConfigError: it is configuration, not data.
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from rimo_eval.artifacts.paths import UPSTREAM_FILES as SOURCES
from rimo_eval.errors import ConfigError
from rimo_eval.io.hashing import sha256_file
from rimo_eval.params.yaml_file import DuplicateKeyError, load_unique
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.validate.rules import CSV_COLUMNS, Finding, TrackCheck, item_issues, schema_errors

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
        "id": {"type": "string", "pattern": "^E[0-9]{3,}(?![\\s\\S])"},
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
        out: dict[str, Any] = {"id": self.id, "track": self.track, "problem_id": self.problem_id,
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
    """Parse and check the errata file; any problem in it is a ConfigError (it is config)."""
    try:
        text = path.read_text(encoding="utf-8")
        doc = load_unique(text, path)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: errata file not found") from exc
    except DuplicateKeyError as exc:  # a repeated key would silently change an entry
        raise ConfigError(str(exc)) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read errata: {exc}") from exc
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '<top>'}: {e.message}"
                for e in Draft202012Validator(ERRATA_SCHEMA).iter_errors(doc)]
    if problems:
        raise ConfigError(f"{path}: invalid errata file:\n  " + "\n  ".join(sorted(problems)))
    lines = _entry_lines(text)
    entries = tuple(
        Erratum(id=e["id"], track=e["track"], problem_id=e["problem_id"],
                covers=tuple(e["covers"]), action=e["action"], reason=e["reason"].strip(),
                evidence=e["evidence"].strip(), field=e.get("field"), value=e.get("value"),
                line=lines[i] if i < len(lines) else None)
        for i, e in enumerate(doc["errata"]))
    problems = _errata_conflicts(entries)
    if problems:
        raise ConfigError(f"{path}: invalid errata file:\n  " + "\n  ".join(problems))
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


