"""The validate stage on the real upstream data, and on copies of it with injected faults."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from rimo_eval.artifacts.items import ITEM_FILES, ITEM_SCHEMAS, load_items
from rimo_eval.errors import StageError
from rimo_eval.io.hashing import fingerprint, sha256_file
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.validate.rules import ID_LETTER_DOMAIN
from rimo_eval.validate.stage import ValidationResult, load_errata, run, validate
from tests.support.factories import params

REPO_ROOT = Path(__file__).resolve().parents[2]
ERRATA = REPO_ROOT / "data/errata.yaml"

Record = dict[str, Any]


@pytest.fixture(scope="module")
def real(mirror_dir: Path) -> ValidationResult:
    return validate(mirror_dir, ERRATA)


def rows(result: ValidationResult, track: str) -> dict[str, Record]:
    return {r["problem_id"]: r for r in result.tables[track].to_pylist()}


# --- helpers that corrupt a copy of the real files ---------------------------------------------


def edit_jsonl(path: Path, pid: str, change: Callable[[Record], None]) -> None:
    """Rewrite the one line of ``pid``, keeping every other byte (and the CRLF) as it was."""
    lines = path.read_bytes().split(b"\n")
    for i, line in enumerate(lines):
        if line.strip() and json.loads(line)["problem_id"] == pid:
            record = json.loads(line)
            change(record)
            ending = b"\r" if line.endswith(b"\r") else b""
            lines[i] = json.dumps(record, ensure_ascii=False).encode() + ending
            path.write_bytes(b"\n".join(lines))
            return
    raise AssertionError(f"{pid} not in {path}")


def edit_csv(path: Path, pid: str, change: Callable[[dict[str, str]], None] | None) -> None:
    """Change (or, with None, drop) the record of ``pid``; field values stay byte-exact."""
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header, records = list(reader.fieldnames or []), list(reader)
    target = [r for r in records if r["problem_id"] == pid]
    assert len(target) == 1, pid
    if change is None:
        records.remove(target[0])
    else:
        change(target[0])
    out = io.StringIO(newline="")
    # QUOTE_ALL: a field holding a lone CR must be quoted, or readers end the record there.
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writeheader()
    writer.writerows(records)
    path.write_text(out.getvalue(), encoding="utf-8", newline="")


def setter(field: str, value: Any) -> Callable[[Record], None]:
    return lambda record: record.__setitem__(field, value)


def write_errata(path: Path, change: Callable[[list[Record]], None]) -> Path:
    doc = yaml.safe_load(ERRATA.read_text(encoding="utf-8"))
    change(doc["errata"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def run_into(tmp_path: Path, raw_dir: Path, errata: Path = ERRATA) -> tuple[Path, Path]:
    items, report = tmp_path / "items", tmp_path / "reports/validation.json"
    run(params(validate={"errata": str(errata)}), raw_dir=raw_dir, items_dir=items,
        report_path=report)
    return items, report


def failure(tmp_path: Path, raw_dir: Path, errata: Path = ERRATA) -> str:
    """The StageError message of a failing run, after checking that nothing was written."""
    with pytest.raises(StageError) as info:
        run_into(tmp_path, raw_dir, errata)
    assert not (tmp_path / "items").exists()
    assert not (tmp_path / "reports").exists()
    return str(info.value)


def assert_names(message: str, where: str, pid: str, rule: str) -> None:
    lines = [ln for ln in message.splitlines() if f"id={pid} rule={rule}:" in ln]
    assert lines, f"no {rule} finding for {pid} in:\n{message}"
    assert any(ln.strip().startswith(where) for ln in lines), lines


# --- the real data ------------------------------------------------------------------------------


def test_real_data_is_ok_with_exactly_the_three_errata(real: ValidationResult) -> None:
    assert real.ok, real.failure_message()
    assert real.violations == []
    applied = real.report["errata"]["applied"]
    assert [(e["id"], e["track"], e["problem_id"], e["action"]) for e in applied] == [
        ("E001", TRACK_N, "2023c2", "set"),
        ("E002", TRACK_P, "2005p3", "mark_ungradable"),
        ("E003", TRACK_P, "2002p4", "mark_ungradable"),
    ]
    covered = sorted((f["problem_id"], f["rule"], f["covered_by"])
                     for f in real.report["findings"])
    assert covered == [
        ("2002p4", "sub_solution.nonempty", "E003"),
        ("2005p3", "sub_solution.nonempty", "E002"),
        ("2023c2", "answer.integer", "E001"),
        ("2023c2", "crosscheck.mismatch", "E001"),
    ]
    # No 'ok' flag: a report on disk is the pass (a failure raises and writes nothing).
    assert "ok" not in real.report and real.report["report_version"] == 2
    assert real.report["counts"] == {
        TRACK_N: {"items": 335, "gradable": 335, "ungradable": 0},
        TRACK_P: {"items": 456, "gradable": 454, "ungradable": 2},
    }


def test_errata_file_is_versioned_and_explained() -> None:
    errata = load_errata(ERRATA)
    assert errata.version >= 1
    assert [e.id for e in errata.entries] == ["E001", "E002", "E003"]
    assert all(e.reason and e.evidence for e in errata.entries)


def test_e001_answer_is_the_csv_value_and_2_pow_2024_minus_1_mod_1000(
        real: ValidationResult) -> None:
    (e001,) = [e for e in load_errata(ERRATA).entries if e.id == "E001"]
    assert (pow(2, 2024, 1000) - 1) % 1000 == 215 == (2**2024 - 1) % 1000
    assert e001.value == str((pow(2, 2024, 1000) - 1) % 1000)
    item = rows(real, TRACK_N)["2023c2"]
    assert item["answer"] == "215"
    assert item["gradable"] is True
    assert item["ungradable_reason"] is None


def test_ungradable_items_keep_their_text_and_reason(real: ValidationResult) -> None:
    items = rows(real, TRACK_P)
    reasons = {e.problem_id: e.reason for e in load_errata(ERRATA).entries}
    for pid in ("2005p3", "2002p4"):
        item = items[pid]
        assert item["gradable"] is False
        assert item["ungradable_reason"] == reasons[pid]
        assert item["number_of_parts"] == 1
        assert item["sub_solutions"] == [""]
        assert item["sub_problems"][0]
    gradable = [r for r in items.values() if r["gradable"]]
    assert len(gradable) == 454
    assert all(r["ungradable_reason"] is None for r in gradable)
    assert all(all(s for s in r["sub_solutions"]) for r in gradable)


def test_normalisations_are_counted_not_violations(real: ValidationResult) -> None:
    assert real.report["normalisations"] == {
        TRACK_N: {"problem": {"crlf": 8}},
        TRACK_P: {"problem": {"whitespace": 1}, "sub-problem1": {"whitespace": 1},
                  "sub-solution1": {"whitespace": 6}},
    }
    for track in (TRACK_N, TRACK_P):
        for row in real.tables[track].to_pylist():
            texts = [row["problem"], *row.get("sub_problems", []), *row.get("sub_solutions", [])]
            texts += [row["solution"]] if track == TRACK_N else []
            assert all("\r\n" not in t and t == t.strip() for t in texts), row["problem_id"]


def test_tables_follow_the_item_contract(real: ValidationResult) -> None:
    for track in (TRACK_N, TRACK_P):
        table = real.tables[track]
        assert table.schema.equals(ITEM_SCHEMAS[track])
        ids = table.column("problem_id").to_pylist()
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        for row in table.to_pylist():
            content = {k: v for k, v in row.items() if k != "content_hash"}
            assert row["content_hash"] == fingerprint(content)
            assert row["track"] == track
    for row in real.tables[TRACK_P].to_pylist():
        assert row["domain"] == ID_LETTER_DOMAIN.get(row["problem_id"][4])
        assert len(row["sub_problems"]) == len(row["sub_solutions"]) == row["number_of_parts"]
    n_rows = real.tables[TRACK_N].to_pylist()
    assert all(r["number_of_parts"] == 1 and r["domain"] for r in n_rows)
    shared = set(rows(real, TRACK_N)) & set(rows(real, TRACK_P))
    assert len(shared) == 96  # the key is (track, problem_id): not duplicates


def test_report_names_inputs_and_mangled_latex(real: ValidationResult,
                                               mirror_dir: Path) -> None:
    inputs = real.report["inputs"]
    assert sorted(inputs) == ["RIMO-N.csv", "RIMO-N.jsonl", "RIMO-P.csv", "RIMO-P.jsonl"]
    for name, info in inputs.items():
        assert info["sha256"] == sha256_file(mirror_dir / name)
    warned = {(w["problem_id"], w["rule"]) for w in real.report["warnings"]}
    mangled = {("1989p2", "text.control_char"), ("2011g6", "text.control_char")}
    assert mangled <= warned
    json.dumps(real.report, allow_nan=False)  # JSON-able


def test_doubled_backslashes_are_warnings_one_per_item(real: ValidationResult) -> None:
    """Issue 28 section 6: 87 RIMO-P items (split into 2-4 parts by upstream) write commands
    as '\\\\ldots'. Warnings, never failures: the models got this text (the paper's protocol)."""
    doubled = [w for w in real.report["warnings"] if w["rule"] == "text.double_backslash"]
    assert len(doubled) == len({w["problem_id"] for w in doubled}) == 87
    assert {w["track"] for w in doubled} == {TRACK_P}
    first = next(w for w in doubled if w["problem_id"] == "1987p1")
    assert first["field"] == "sub_problems[0]" and "\\\\ldots" in first["message"]
    assert "sub_solutions[0]" in first["message"]  # every field it occurs in is named
    assert real.ok and "text.double_backslash" in real.report["rules"]
    parts = {r["problem_id"]: r["number_of_parts"] for r in real.tables[TRACK_P].to_pylist()}
    assert all(parts[w["problem_id"]] > 1 for w in doubled)
    # Kept as upstream has it: the stored sub-problem still holds the doubled backslash.
    (row,) = [r for r in real.tables[TRACK_P].to_pylist() if r["problem_id"] == "1987p1"]
    assert "\\\\ldots" in row["sub_problems"][0]


def test_run_writes_byte_identical_outputs(tmp_path: Path, mirror_dir: Path) -> None:
    first = run_into(tmp_path / "a", mirror_dir)
    second = run_into(tmp_path / "b", mirror_dir)
    for track, name in ITEM_FILES.items():
        a, b = first[0] / name, second[0] / name
        assert a.read_bytes() == b.read_bytes()
        assert pq.read_metadata(a).row_group(0).column(0).compression == "ZSTD"
        assert pq.read_table(a).schema.equals(ITEM_SCHEMAS[track])
    assert first[1].read_bytes() == second[1].read_bytes()
    assert json.loads(first[1].read_text(encoding="utf-8"))["report_version"] == 2
    items = {i.problem_id: i for i in load_items(TRACK_N, first[0])}
    assert items["2023c2"].answer == "215"


# --- injected faults: each names file, problem_id and rule, and writes nothing -------------------

FAULTS: dict[str, tuple[Callable[[Path], None], str, str, str]] = {
    "duplicate id": (
        lambda raw: (raw / "RIMO-N.jsonl").write_bytes(
            (raw / "RIMO-N.jsonl").read_bytes()
            + (raw / "RIMO-N.jsonl").read_bytes().split(b"\n")[0] + b"\n"),
        "RIMO-N.jsonl:336", "2023a1", "id.unique"),
    "non-integer answer": (
        lambda raw: (edit_jsonl(raw / "RIMO-N.jsonl", "2023a1", setter("answer", "50.5")),
                     edit_csv(raw / "RIMO-N.csv", "2023a1", setter("answer", "50.5"))),
        "RIMO-N.jsonl:1", "2023a1", "answer.integer"),
    "more parts than present": (
        lambda raw: (edit_jsonl(raw / "RIMO-P.jsonl", "2023a2", setter("number_of_parts", 2)),
                     edit_csv(raw / "RIMO-P.csv", "2023a2", setter("number_of_parts", "2"))),
        "RIMO-P.jsonl:1", "2023a2", "parts.count"),
    "number_of_parts out of range": (
        lambda raw: edit_jsonl(raw / "RIMO-P.jsonl", "2023a2", setter("number_of_parts", 5)),
        "RIMO-P.jsonl:1", "2023a2", "parts.range"),
    "number_of_parts not an integer": (
        lambda raw: edit_jsonl(raw / "RIMO-P.jsonl", "2023a2", setter("number_of_parts", "1")),
        "RIMO-P.jsonl:1", "2023a2", "schema.type"),
    "missing field": (
        lambda raw: edit_jsonl(raw / "RIMO-N.jsonl", "2023a5", lambda r: r.pop("solution")),
        "RIMO-N.jsonl:3", "2023a5", "schema.required"),
    "extra field": (
        lambda raw: edit_jsonl(raw / "RIMO-P.jsonl", "2023a2", setter("hint", "x")),
        "RIMO-P.jsonl:1", "2023a2", "schema.additionalProperties"),
    "unknown domain": (
        lambda raw: (edit_jsonl(raw / "RIMO-N.jsonl", "2023a1", setter("type", "topology")),
                     edit_csv(raw / "RIMO-N.csv", "2023a1", setter("type", "topology"))),
        "RIMO-N.jsonl:1", "2023a1", "domain.known"),
    "nested list disagrees": (
        lambda raw: edit_jsonl(raw / "RIMO-P.jsonl", "2023a2",
                               lambda r: r["sub_problems"][0].__setitem__("sub_problem", "x")),
        "RIMO-P.jsonl:1", "2023a2", "parts.nested"),
    "CSV value mismatch": (
        lambda raw: edit_csv(raw / "RIMO-N.csv", "2023c1",
                             lambda r: r.__setitem__("solution", r["solution"] + " QED")),
        "RIMO-N.csv:", "2023c1", "crosscheck.mismatch"),
    "CSV row missing": (
        lambda raw: edit_csv(raw / "RIMO-P.csv", "2015g5", None),
        "RIMO-P.jsonl:", "2015g5", "crosscheck.missing_row"),
    "invalid JSON line": (
        lambda raw: edit_jsonl_bytes(raw / "RIMO-N.jsonl", 2, lambda b: b[:-40]),
        "RIMO-N.jsonl:2", "2023a2", "json.parse"),
    "invalid UTF-8": (
        lambda raw: edit_jsonl_bytes(raw / "RIMO-P.jsonl", 3,
                                     lambda b: b.replace(b"Let", b"L\xffet", 1)),
        "RIMO-P.jsonl:3", "2023a5", "encoding.utf8"),
}


def edit_jsonl_bytes(path: Path, line: int, change: Callable[[bytes], bytes]) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = change(lines[line - 1])
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_injected_fault_fails_naming_file_id_and_rule(fault: str, tmp_path: Path,
                                                      raw_dir: Path) -> None:
    inject, where, pid, rule = FAULTS[fault]
    inject(raw_dir)
    assert_names(failure(tmp_path, raw_dir), where, pid, rule)


def test_every_uncovered_finding_is_listed(tmp_path: Path, raw_dir: Path) -> None:
    for pid in ("2023a1", "2023a2"):
        edit_jsonl(raw_dir / "RIMO-N.jsonl", pid, setter("type", "topology"))
    message = failure(tmp_path, raw_dir)
    assert_names(message, "RIMO-N.jsonl:1", "2023a1", "domain.known")
    assert_names(message, "RIMO-N.jsonl:2", "2023a2", "domain.known")
    assert_names(message, "RIMO-N.csv:", "2023a1", "crosscheck.mismatch")
    assert message.count("rule=crosscheck.mismatch") == 2


def test_invalid_utf8_names_the_byte_offset(raw_dir: Path) -> None:
    path = raw_dir / "RIMO-N.csv"
    data = path.read_bytes()
    at = data.index(b"Professor")
    path.write_bytes(data[:at] + b"\xc3\x28" + data[at + 2:])
    result = validate(raw_dir, ERRATA)
    (bad,) = [f for f in result.violations if f.rule == "encoding.utf8"]
    assert (bad.file, bad.line) == ("RIMO-N.csv", 2)
    assert f"byte offset {at}" in bad.message


def test_stale_erratum_is_a_violation(tmp_path: Path, raw_dir: Path) -> None:
    stale = {"id": "E004", "track": TRACK_N, "problem_id": "2023a1",
             "covers": ["answer.integer"], "action": "set", "field": "answer", "value": "50",
             "reason": "test", "evidence": "test"}
    errata = write_errata(tmp_path / "errata.yaml", lambda es: es.append(stale))
    assert_names(failure(tmp_path, raw_dir, errata), f"{errata.as_posix()}:", "2023a1",
                 "errata.unused")


def test_erratum_goes_stale_when_upstream_fixes_the_data(tmp_path: Path, raw_dir: Path) -> None:
    edit_jsonl(raw_dir / "RIMO-N.jsonl", "2023c2", setter("answer", "215"))
    message = failure(tmp_path, raw_dir)
    assert "E001 covers answer.integer" in message and "E001 covers crosscheck.mismatch" in message
    assert message.count("rule=errata.unused") == 2


def test_without_errata_the_real_findings_fail(tmp_path: Path, mirror_dir: Path) -> None:
    errata = write_errata(tmp_path / "errata.yaml", lambda es: es.clear())
    message = failure(tmp_path, mirror_dir, errata)
    assert_names(message, "RIMO-N.jsonl:5", "2023c2", "answer.integer")
    assert_names(message, "RIMO-N.csv:208", "2023c2", "crosscheck.mismatch")
    assert_names(message, "RIMO-P.jsonl:320", "2005p3", "sub_solution.nonempty")
    assert_names(message, "RIMO-P.jsonl:332", "2002p4", "sub_solution.nonempty")
    assert "4 finding(s)" in message


def test_a_set_erratum_covers_only_its_own_field(tmp_path: Path, raw_dir: Path) -> None:
    edit_csv(raw_dir / "RIMO-N.csv", "2023c2",
             lambda r: r.__setitem__("problem", r["problem"] + " (mod 1000)"))
    message = failure(tmp_path, raw_dir)
    assert_names(message, "RIMO-N.csv:208", "2023c2", "crosscheck.mismatch")
    assert "problem:" in message and "answer:" not in message


def test_a_correction_must_pass_the_rules_again(tmp_path: Path, mirror_dir: Path) -> None:
    def bad_value(entries: list[Record]) -> None:
        entries[0]["value"] = "2^{2024}-1 mod 1000"
    errata = write_errata(tmp_path / "errata.yaml", bad_value)
    message = failure(tmp_path, mirror_dir, errata)
    assert_names(message, "RIMO-N.jsonl:5", "2023c2", "answer.integer")
    assert "after E001" in message


def test_invalid_errata_file_is_a_stage_error(tmp_path: Path, mirror_dir: Path) -> None:
    errata = write_errata(tmp_path / "errata.yaml",
                          lambda es: es[1].__setitem__("action", "delete"))
    with pytest.raises(StageError, match=r"invalid errata file:(.|\n)*delete"):
        validate(mirror_dir, errata)
    bad_rule = write_errata(tmp_path / "e2.yaml", lambda es: es[0].__setitem__(
        "covers", ["count.items"]))
    with pytest.raises(StageError, match=r"count\.items"):
        validate(mirror_dir, bad_rule)


def test_missing_file_is_a_stage_error_naming_it(tmp_path: Path, raw_dir: Path) -> None:
    (raw_dir / "RIMO-P.csv").unlink()
    message = failure(tmp_path, raw_dir)
    assert "RIMO-P.csv" in message and "missing" in message


def test_whitespace_only_csv_difference_is_counted(raw_dir: Path) -> None:
    edit_csv(raw_dir / "RIMO-N.csv", "2023a2", lambda r: r.__setitem__("solution",
                                                                       r["solution"] + "\n  "))
    result = validate(raw_dir, ERRATA)
    assert result.ok, result.failure_message()
    assert result.report["normalisations"][TRACK_N] == {"problem": {"crlf": 8},
                                                        "solution": {"whitespace": 1}}


def test_utf8_bom_is_tolerated_and_reported(raw_dir: Path, real: ValidationResult) -> None:
    path = raw_dir / "RIMO-N.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    result = validate(raw_dir, ERRATA)
    assert result.ok, result.failure_message()
    assert result.report["inputs"]["RIMO-N.jsonl"]["bom"] is True
    assert result.tables[TRACK_N].equals(real.tables[TRACK_N])


def test_stored_text_is_normalised_to_the_same_item(raw_dir: Path,
                                                    real: ValidationResult) -> None:
    def pad(record: Record) -> None:
        text = " " + record["sub-solution1"].replace("\n", "\r\n") + " \r\n"
        record["sub-solution1"] = record["sub_problems"][0]["sub_solution"] = text
    edit_jsonl(raw_dir / "RIMO-P.jsonl", "2023a2", pad)
    result = validate(raw_dir, ERRATA)
    assert result.ok, result.failure_message()
    assert rows(result, TRACK_P)["2023a2"] == rows(real, TRACK_P)["2023a2"]
    assert result.report["normalisations"][TRACK_P]["sub-solution1"] == {"whitespace": 7}
    assert result.report["stored_text_changes"][TRACK_P] == {
        "sub-solution1": {"crlf": 1, "strip": 1}}


@pytest.mark.parametrize("bad", ["2023a1\n", "2023a1\r\n", "2023a1x", " 2023a1"])
def test_problem_id_must_match_in_full(tmp_path: Path, raw_dir: Path, bad: str) -> None:
    """A JSON Schema ``$`` (Python's re.search) also matches before a final newline; the
    pattern ends in a lookahead for no character at all, which both dialects honour."""
    edit_jsonl(raw_dir / "RIMO-N.jsonl", "2023a1", setter("problem_id", bad))
    message = failure(tmp_path, raw_dir)
    lines = [ln for ln in message.splitlines() if "rule=schema.pattern" in ln]
    assert lines, message
    assert lines[0].strip().startswith(f"RIMO-N.jsonl:1 id={bad!r}" if not bad.isprintable()
                                       else f"RIMO-N.jsonl:1 id={bad} ")
