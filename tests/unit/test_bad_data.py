"""Bad upstream data: corrupted copies of the real files, and property-based tests of the readers.

Every fault in ``tests.support.corrupt.FAULTS`` must fail the validate stage with a StageError whose
report names the file, the line and/or problem_id, and the rule, and must leave the item tables
and the validation report of the previous good run byte-for-byte as they were. Single faults
already covered by tests/unit/test_validate.py are not repeated here.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from rimo_eval.artifacts.items import DOMAINS
from rimo_eval.artifacts.paths import ITEMS_DIR, VALIDATION_PATH
from rimo_eval.errors import StageError
from rimo_eval.io.hashing import sha256_bytes
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.validate.rawio import BOM, RawFile, decode_lines, read_csv, read_jsonl
from rimo_eval.validate.rules import CSV_COLUMNS, RULES, Finding
from rimo_eval.validate.stage import SOURCES, ValidationResult, run, validate
from tests.support.corrupt import FAULTS, N_JSONL, Fault, deep_nesting
from tests.support.factories import params
from tests.support.paths import REPO_ROOT, UPSTREAM_FILES

ERRATA = REPO_ROOT / "data/errata.yaml"
ITEMS, REPORT = ITEMS_DIR, VALIDATION_PATH


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the output folders of the validate stage, temporaries included."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for folder in (root / ITEMS, root / REPORT.parent) if folder.is_dir()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory, mirror_dir: Path) -> dict[str, bytes]:
    """The outputs of a good run on the real data: what a failing run must leave in place."""
    root = tmp_path_factory.mktemp("good")
    run(params(validate={"errata": str(ERRATA)}), raw_dir=mirror_dir, items_dir=root / ITEMS,
        report_path=root / REPORT)
    files = snapshot(root)
    assert sorted(files) == ["data/items/rimo_n.parquet", "data/items/rimo_p.parquet",
                             "reports/validation.json"]
    return files


def with_previous(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


# --- the table of faults ---------------------------------------------------------------------


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_fault_is_named_and_nothing_is_written(fault: Fault, raw_dir: Path, tmp_path: Path,
                                               good_run: dict[str, bytes]) -> None:
    expected = fault.inject(raw_dir)
    assert expected, fault.name
    with_previous(tmp_path, good_run)
    with pytest.raises(StageError) as info:
        run(params(validate={"errata": str(ERRATA)}), raw_dir=raw_dir, items_dir=tmp_path / ITEMS,
            report_path=tmp_path / REPORT)
    message = str(info.value)
    assert message.startswith("validation failed:"), message[:500]
    findings = [ln.strip() for ln in message.splitlines()[1:]]
    for want in expected:
        assert want.line is not None or want.problem_id is not None or want.text, want
        assert any(want.matches(f) for f in findings), (
            f"{fault.name}: no finding {want} in:\n" + "\n".join(findings[:40]))
    assert all(f.split(" rule=")[1].split(":")[0] in RULES
               or f.split(" rule=")[1].startswith("schema.") for f in findings)
    assert snapshot(tmp_path) == good_run  # the previous artifacts, no temporary files


def test_fault_table_covers_the_issue_list() -> None:
    """The kinds of damage the suite must include, each at least once."""
    names = " ".join(f.name for f in FAULTS).lower()
    for kind in ("truncated", "utf-8", "bom", "duplicate id", "missing", "is a number",
                 "answer", "parts", "empty", "10x"):
        assert kind in names, kind
    assert len({f.name for f in FAULTS}) == len(FAULTS)


# --- what must not be a fault ----------------------------------------------------------------


@pytest.fixture(scope="module")
def real(mirror_dir: Path) -> ValidationResult:
    return validate(mirror_dir, ERRATA)


def _bom_everywhere(raw: Path) -> None:
    for name in UPSTREAM_FILES:
        (raw / name).write_bytes(BOM + (raw / name).read_bytes())


def _lf_only(raw: Path) -> None:
    """RIMO-N.jsonl ends its lines with CRLF upstream; LF must give the same items."""
    path = raw / N_JSONL
    path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n"))


def _no_final_newline(raw: Path) -> None:
    path = raw / "RIMO-P.jsonl"
    path.write_bytes(path.read_bytes().rstrip(b"\n"))


@pytest.mark.parametrize("variant", [_bom_everywhere, _lf_only, _no_final_newline],
                         ids=["BOM on all four files", "LF for CRLF", "no final newline"])
def test_benign_variants_give_the_same_items(variant: Any, raw_dir: Path,
                                             real: ValidationResult) -> None:
    variant(raw_dir)
    result = validate(raw_dir, ERRATA)
    assert result.ok, result.failure_message()
    for track in (TRACK_N, TRACK_P):
        assert result.tables[track].equals(real.tables[track]), track


def test_cli_reports_a_fault_without_traceback(raw_dir: Path, tmp_path: Path,
                                               good_run: dict[str, bytes]) -> None:
    """``rimo-eval validate`` as DVC runs it, on input that used to crash the stage."""
    root = tmp_path / "project"
    shutil.copytree(raw_dir, root / "data/raw")
    (want,) = [e for e in deep_nesting(root / "data/raw") if e.rule == "json.parse"]
    shutil.copyfile(ERRATA, root / "data/errata.yaml")
    # The whole params file: the CLI validates every section before any stage runs.
    shutil.copyfile(REPO_ROOT / "params.yaml", root / "params.yaml")
    with_previous(root, good_run)
    exe = Path(sys.executable).parent / "rimo-eval"
    proc = subprocess.run([str(exe), "validate"], cwd=root, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert f"{want.file}:{want.line} id=- rule=json.parse" in proc.stderr
    assert snapshot(root) == good_run


# --- property-based: the readers ---------------------------------------------------------------

# Fragments that reach the readers' edge cases far more often than uniform bytes do.
_FRAGMENTS = st.sampled_from([
    b"{", b"}", b"[", b"]", b'"', b",", b":", b"\n", b"\r\n", b"\r", BOM, b"\xff", b"\xc3",
    b"\xed\xa0\x80", b"\\u", b"\\ud800", b"NaN", b"1e999", b'"problem_id"', b'"2023a1"',
    b"null", b"0", b"\x00", b'""', b"[" * 50,
])
_BYTES = st.lists(st.one_of(_FRAGMENTS, st.binary(max_size=12)), max_size=40).map(b"".join)
_TRACKS = st.sampled_from([TRACK_N, TRACK_P])


def _raw(data: bytes, name: str = "x.jsonl") -> RawFile:
    bom = data.startswith(BOM)
    return RawFile(name, data[len(BOM):] if bom else data, sha256_bytes(data), bom)


def _check_findings(findings: list[Finding], n_lines: int) -> None:
    for f in findings:
        assert f.rule in RULES, f
        assert f.line is None or 1 <= f.line <= n_lines, (f, n_lines)
        assert f.file == "x.jsonl"


@settings(max_examples=300, deadline=None)
@given(_BYTES, _TRACKS)
@example(b"[" * 100_000, TRACK_N)  # nested deeper than the recursion limit
@example(b'{"problem_id": "2023a1", "problem": "\\udc00"}\n', TRACK_N)
def test_readers_never_raise_on_arbitrary_bytes(data: bytes, track: str) -> None:
    raw = _raw(data)
    n_lines = raw.data.count(b"\n") + 1
    text_lines, findings = decode_lines(raw, track)
    assert len(text_lines) == n_lines
    _check_findings(findings, n_lines)
    rows, findings = read_jsonl(raw, track)
    _check_findings(findings, n_lines)
    assert [r.line for r in rows] == list(range(1, len(rows) + 1))
    table, findings = read_csv(raw, track, CSV_COLUMNS[track])
    _check_findings(findings, n_lines)
    assert all(1 <= line <= n_lines for line, _ in table.rows)


_TEXT = st.text(max_size=30)  # no surrogates: every such string is UTF-8-encodable
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _TEXT,
              st.floats(allow_nan=False, allow_infinity=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(_TEXT, _JSON, min_size=1, max_size=5), max_size=8),
       st.booleans(), st.booleans(), st.booleans(), st.sampled_from([None, (",", ":")]))
def test_wellformed_jsonl_round_trips(records: list[dict[str, Any]], crlf: bool, bom: bool,
                                      ascii_only: bool, separators: Any) -> None:
    end = b"\r\n" if crlf else b"\n"
    body = b"".join(json.dumps(r, ensure_ascii=ascii_only, separators=separators).encode()
                    + end for r in records)
    rows, findings = read_jsonl(_raw((BOM if bom else b"") + body), TRACK_N)
    assert findings == []
    assert [r.record for r in rows] == records
    assert [r.line for r in rows] == list(range(1, len(records) + 1))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_TEXT, min_size=3, max_size=3), max_size=8),
       st.sampled_from(["\n", "\r\n"]), st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]))
def test_wellformed_csv_round_trips(records: list[list[str]], terminator: str,
                                    quoting: int) -> None:
    # Python's writer leaves a lone CR unquoted when the terminator is LF: not well-formed.
    assume(quoting == csv.QUOTE_ALL or terminator == "\r\n"
           or not any("\r" in f for r in records for f in r))
    columns = ("problem_id", "a", "b")
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator=terminator, quoting=quoting)
    writer.writerow(columns)
    writer.writerows(records)
    table, findings = read_csv(_raw(out.getvalue().encode(), "x.csv"), TRACK_N, columns)
    assert findings == []
    assert table.header == list(columns)
    assert [list(row.values()) for _, row in table.rows] == records
    # Each record starts on the physical line after the previous one ends.
    starts = [line for line, _ in table.rows]
    assert starts == sorted(starts) and (not starts or starts[0] == 2)


# --- property-based: the whole validate stage on small, mutated inputs ----------------------

_N = {"problem_id": "2023a1", "problem": "Find n.", "solution": "So n = 12.", "answer": "12",
      "type": "algebra"}
_P: dict[str, Any] = {"problem_id": "2023a3", "problem": "Prove it.", "number_of_parts": 2,
                      "sub_problems": [{"index": i, "sub_problem": f"q{i}" if i < 3 else None,
                                        "sub_solution": f"s{i}" if i < 3 else None}
                                       for i in range(1, 5)]}
for _i in range(1, 5):
    _P[f"sub-problem{_i}"] = f"q{_i}" if _i < 3 else None
    _P[f"sub-solution{_i}"] = f"s{_i}" if _i < 3 else None
# Values that a type confusion, a float or a Unicode look-alike would slip past a sloppy check.
_TRICKY = st.one_of(st.none(), st.booleans(), st.integers(-2, 6), _TEXT,
                    st.sampled_from([1.0, 2.0, 0.5, -0.0, "", " ", "\r\n", "\uff11\uff12",
                                     "\u0663", "2023a", [], {}, ["x"], {"index": 1}]))
_PATHS = {TRACK_N: [(k,) for k in _N],
          TRACK_P: [(k,) for k in _P] + [("sub_problems", i) for i in range(4)]
          + [("sub_problems", i, k) for i in range(4)
             for k in ("index", "sub_problem", "sub_solution")]}
_DELETE = object()


def _mutate(base: dict[str, Any], changes: list[tuple[tuple[Any, ...], Any]]) -> dict[str, Any]:
    record = copy.deepcopy(base)
    for path, value in changes:
        target: Any = record
        try:
            for key in path[:-1]:
                target = target[key]
            if value is _DELETE:
                del target[path[-1]]
            else:
                target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            pass  # an earlier change replaced the container
    return record


def _records(track: str) -> st.SearchStrategy[list[dict[str, Any]]]:
    base = _N if track == TRACK_N else _P
    change = st.tuples(st.sampled_from(_PATHS[track]), st.one_of(_TRICKY, st.just(_DELETE)))
    return st.lists(st.lists(change, max_size=2).map(lambda c: _mutate(base, c)), max_size=3)


def _write_track(raw: Path, track: str, records: list[dict[str, Any]]) -> None:
    jsonl, csv_name = SOURCES[track]
    (raw / jsonl).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS[track])
    for r in records:
        writer.writerow(["" if r.get(c) is None else str(r.get(c)) for c in CSV_COLUMNS[track]])
    (raw / csv_name).write_text(out.getvalue(), encoding="utf-8", newline="")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(TRACK_N), _records(TRACK_P))
@example([], [_mutate(_P, [(("number_of_parts",), 2.0)])])  # once a TypeError in build_rows
@example([_mutate(_N, [(("answer",), "\uff11\uff12")])], [])  # once accepted as an integer
@example([], [_mutate(_P, [(("sub_problems", 1, "index"), 2.0)])])
def test_validate_never_crashes_and_unflagged_items_obey_the_rules(
        n_records: list[dict[str, Any]], p_records: list[dict[str, Any]]) -> None:
    """Small mutated inputs: validate returns a result (never raises), and every item it built
    that no violation names satisfies the benchmark rules, re-checked here independently."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        _write_track(raw, TRACK_N, n_records)
        _write_track(raw, TRACK_P, p_records)
        (raw / "errata.yaml").write_text("version: 1\nerrata: []\n")
        result = validate(raw, raw / "errata.yaml")
    json.dumps(result.report, allow_nan=False)
    assert not result.ok  # these inputs never have the published 335/456 items
    flagged = {(f.track, f.problem_id) for f in result.violations}
    for row in result.tables[TRACK_N].to_pylist():
        if (TRACK_N, row["problem_id"]) not in flagged:
            assert re.fullmatch(r"-?[0-9]+", row["answer"]), row
            assert row["domain"] in DOMAINS and row["problem"] and row["solution"], row
    for row in result.tables[TRACK_P].to_pylist():
        if (TRACK_P, row["problem_id"]) not in flagged:
            parts = row["number_of_parts"]
            assert type(parts) is int and 1 <= parts <= 4, row
            assert len(row["sub_problems"]) == len(row["sub_solutions"]) == parts, row
            assert all(row["sub_problems"]) and all(row["sub_solutions"]), row
            assert row["problem"], row
