"""The checks of the validate stage: findings, JSON Schemas, benchmark rules, cross-check.

Each check is a small pure function that returns findings; ``rimo_eval.validate`` runs them
over the parsed files, matches findings to errata and builds the item tables.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, validators

from rimo_eval.artifacts.items import DOMAINS
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

# Every rule a finding can carry, with what it means (the report lists them).
RULES: dict[str, str] = {
    "input.missing": "an input file is missing",
    "encoding.utf8": "bytes that are not valid UTF-8",
    "json.parse": "a JSONL line that is not one JSON value",
    "json.duplicate_key": "a JSON object with a repeated key",
    "csv.parse": "CSV that cannot be parsed",
    "csv.header": "CSV header without the expected columns",
    "csv.row": "CSV record with the wrong number of fields",
    "schema.*": "a JSON Schema error (suffix: the failing keyword, e.g. schema.required)",
    "count.items": "a track without its published number of items",
    "id.unique": "a problem_id that occurs twice in one file",
    "text.nonempty": "an empty problem or solution",
    "answer.integer": "a RIMO-N answer that is not an integer",
    "domain.known": "a RIMO-N type outside the four domains",
    "domain.id_letter": "a RIMO-N type that contradicts the domain letter of its id",
    "parts.range": "a RIMO-P number_of_parts outside 1..4",
    "parts.count": "RIMO-P sub-problems present do not match number_of_parts",
    "sub_solution.nonempty": "a RIMO-P sub-problem without its sub-solution",
    "parts.nested": "RIMO-P nested sub_problems disagree with the flattened fields",
    "crosscheck.mismatch": "JSONL and CSV values differ beyond line endings and whitespace",
    "crosscheck.missing_row": "a problem_id present in only one of JSONL and CSV",
    "errata.unused": "an erratum (or one rule it covers) that matches no finding",
}

EXPECTED_COUNTS = {TRACK_N: 335, TRACK_P: 456}
MAX_PARTS = 4
N_FIELDS = ("problem_id", "problem", "solution", "answer", "type")
P_PART_FIELDS = tuple(
    f"sub-{kind}{i}" for i in range(1, MAX_PARTS + 1) for kind in ("problem", "solution")
)
P_FIELDS = ("problem_id", "problem", "number_of_parts", *P_PART_FIELDS)
# The CSV carries the same columns as the JSONL, less the nested list.
CSV_COLUMNS = {TRACK_N: N_FIELDS, TRACK_P: P_FIELDS}
SCHEMA_FILES = {TRACK_N: "rimo_n.schema.json", TRACK_P: "rimo_p.schema.json"}
# RIMO-P ids carry the shortlist domain as a letter; 'p' (an IMO problem) has none.
ID_LETTER_DOMAIN = {"a": "algebra", "c": "combinatorics", "g": "geometry", "n": "number theory"}
_INTEGER = re.compile(r"-?[0-9]+")  # ASCII only: \d also matches fullwidth, Arabic-Indic digits
_REQUIRED = re.compile(r"^'(.+)' is a required property$")
_SHOW = 60


@dataclass(frozen=True)
class Finding:
    """One problem in the input; ``field`` lets an erratum cover exactly the field it fixes."""

    file: str
    line: int | None
    track: str | None
    problem_id: str | None
    rule: str
    message: str
    field: str | None = None

    def render(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        pid = self.problem_id or "-"
        # An id such as "2001a1\n" is shown escaped, so one finding stays one line.
        pid = pid if pid.isprintable() else repr(pid)
        return f"{where} id={pid} rule={self.rule}: {self.message}"

    def sort_key(self) -> tuple[str, int, str, str, str, str]:
        return (self.file, self.line or 0, self.problem_id or "", self.rule, self.field or "",
                self.message)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TrackCheck:
    """What the raw files of one track say: first row per id, findings, normalisations."""

    track: str
    records: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    schema_invalid: set[str] = field(default_factory=set)  # ids whose first row fails it
    findings: list[Finding] = field(default_factory=list)
    # field -> kind ('crlf' | 'whitespace') -> count of JSONL/CSV differences normalised away
    normalised: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))


def show(value: Any) -> str:
    """A value for a message: repr, truncated so one finding stays one readable line."""
    text = repr(value)
    return text if len(text) <= _SHOW else text[: _SHOW - 3] + "..."


def normalise_text(text: str) -> str:
    """The stored form of every text field: LF line endings, no surrounding whitespace."""
    return text.replace("\r\n", "\n").strip()


def is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not normalise_text(value))


# --- JSON Schema -----------------------------------------------------------------------------


@cache
def schema(track: str) -> dict[str, Any]:
    ref = resources.files("rimo_eval") / "schemas" / SCHEMA_FILES[track]
    doc: dict[str, Any] = json.loads(ref.read_text(encoding="utf-8"))
    return doc


# JSON Schema counts 2.0 as an integer; a JSONL "number_of_parts": 2.0 is not one (and would
# reach range() and the int64 column), so "integer" here means a JSON number without a fraction
# or exponent, i.e. what json.loads returns as int.
_STRICT = validators.extend(Draft202012Validator, type_checker=(
    Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, x: isinstance(x, int) and not isinstance(x, bool))))


@cache
def _validator(track: str) -> Draft202012Validator:
    doc = schema(track)
    Draft202012Validator.check_schema(doc)
    validator: Draft202012Validator = _STRICT(doc)
    return validator


def schema_errors(track: str, record: Any) -> list[tuple[str, str | None, str]]:
    """Every schema error of one row as (rule, field, message), in a stable order."""
    errors = sorted(
        _validator(track).iter_errors(record),
        key=lambda e: (json.dumps(list(e.absolute_path)), e.validator, e.message),
    )
    out = []
    for err in errors:
        path = list(err.absolute_path)
        field = str(path[0]) if path else None
        if err.validator == "required" and not path:
            # The missing property is the field (an erratum may supply it).
            missing = _REQUIRED.match(err.message)
            field = missing.group(1) if missing else None
        where = "/".join(str(p) for p in path) or "<row>"
        out.append((f"schema.{err.validator}", field, f"{where}: {_short(err.message)}"))
    return out


def _short(message: str) -> str:
    # jsonschema quotes whole instances (a full proof text); keep the message one line.
    message = message.replace("\n", " ")
    return message if len(message) <= 200 else message[:197] + "..."


# --- benchmark rules on one schema-valid row ---------------------------------------------------

Issue = tuple[str, str | None, str]  # (rule, field, message)


def item_issues(track: str, record: dict[str, Any]) -> list[Issue]:
    return rules_n(record) if track == TRACK_N else rules_p(record)


def rules_n(rec: dict[str, Any]) -> list[Issue]:
    issues = _nonempty(rec, ("problem", "solution"))
    if not _INTEGER.fullmatch(rec["answer"].strip()):
        issues.append(("answer.integer", "answer",
                       f"answer {show(rec['answer'])} is not an integer (-?digits)"))
    kind = rec["type"]
    if kind not in DOMAINS:
        issues.append(("domain.known", "type",
                       f"type {show(kind)} is not one of {', '.join(DOMAINS)}"))
    else:
        implied = ID_LETTER_DOMAIN.get(rec["problem_id"][4])
        if implied is not None and implied != kind:
            issues.append(("domain.id_letter", "type",
                           f"type {show(kind)} but the id letter means {implied!r}"))
    return issues


def rules_p(rec: dict[str, Any]) -> list[Issue]:
    issues = _nonempty(rec, ("problem",))
    n = rec["number_of_parts"]
    if not 1 <= n <= MAX_PARTS:
        issues.append(("parts.range", "number_of_parts",
                       f"number_of_parts {n} is outside 1..{MAX_PARTS}"))
    else:
        issues += _parts(rec, n)
    issues += _nested(rec)
    return issues


def _nonempty(rec: dict[str, Any], fields: tuple[str, ...]) -> list[Issue]:
    return [("text.nonempty", f, f"{f} is empty") for f in fields if is_empty(rec[f])]


def _parts(rec: dict[str, Any], n: int) -> list[Issue]:
    """Parts 1..n are present with solutions; parts after n are absent."""
    issues: list[Issue] = []
    for i in range(1, MAX_PARTS + 1):
        prob, sol = f"sub-problem{i}", f"sub-solution{i}"
        if i <= n and is_empty(rec[prob]):
            issues.append(("parts.count", prob,
                           f"number_of_parts is {n} but {prob} is empty"))
        elif i <= n and is_empty(rec[sol]):
            issues.append(("sub_solution.nonempty", sol,
                           f"{prob} has no reference solution ({sol} is {show(rec[sol])})"))
        for key in (prob, sol) if i > n else ():
            if not is_empty(rec[key]):
                issues.append(("parts.count", key,
                               f"number_of_parts is {n} but {key} is present"))
    return issues


def _nested(rec: dict[str, Any]) -> list[Issue]:
    """The nested list repeats the flattened fields: slot i holds index i and the same texts."""
    issues: list[Issue] = []
    for slot, part in enumerate(rec["sub_problems"], start=1):
        if part["index"] != slot:
            issues.append(("parts.nested", "sub_problems",
                           f"sub_problems[{slot - 1}] has index {part['index']}, expected {slot}"))
            continue
        for key, flat in (("sub_problem", f"sub-problem{slot}"),
                          ("sub_solution", f"sub-solution{slot}")):
            if part[key] != rec[flat]:
                issues.append(("parts.nested", flat,
                               f"sub_problems[{slot - 1}].{key} {show(part[key])} differs "
                               f"from {flat} {show(rec[flat])}"))
    return issues


# --- cross-check JSONL against CSV ---------------------------------------------------------------


def as_csv_text(value: Any) -> Any:
    """How a JSONL value is written in the CSV: null is '', an integer its digits; any other
    value as it is (compare calls a non-string a mismatch)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    return str(value) if isinstance(value, int) else value


def compare(jsonl_value: Any, csv_value: str) -> str | None:
    """None when equal; else the kind of difference: 'crlf', 'whitespace' or 'mismatch'."""
    left = as_csv_text(jsonl_value)
    if not isinstance(left, str):
        return "mismatch"
    if left == csv_value:
        return None
    left_lf, right_lf = left.replace("\r\n", "\n"), csv_value.replace("\r\n", "\n")
    if left_lf == right_lf:
        return "crlf"
    if left_lf.strip() == right_lf.strip():
        return "whitespace"
    return "mismatch"
