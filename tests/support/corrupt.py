"""Corrupted copies of the upstream files, for the bad-data suite (tests/unit/test_bad_data.py).

Each fault edits a writable copy of the four real files (the ``raw_dir`` fixture) in place and
returns what the validate stage must report: the file, the line and/or problem_id, and the rule.
Edits work on bytes, so every byte the fault does not touch (CRLF line ends, a missing final
newline, odd spacing) stays exactly as upstream has it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Record = dict[str, Any]


@dataclass(frozen=True)
class Expect:
    """A finding the stage must report. ``line``/``problem_id`` None: not checked (file-level
    findings such as count.items have neither); ``text`` must then occur in the message."""

    file: str
    rule: str
    line: int | None = None
    problem_id: str | None = None
    text: str | None = None

    def matches(self, rendered: str) -> bool:
        """Whether one rendered finding (``file:line id=pid rule=rule: message``) is this one."""
        where, _, rest = rendered.partition(" id=")
        pid, _, rest = rest.partition(" rule=")
        rule, _, message = rest.partition(": ")
        file, _, line = where.partition(":")
        return (file == self.file and rule == self.rule
                and (self.line is None or line == str(self.line))
                and (self.problem_id is None or pid == self.problem_id)
                and (self.text is None or self.text in message))


Inject = Callable[[Path], list[Expect]]


@dataclass(frozen=True)
class Fault:
    name: str
    inject: Inject  # corrupts the copy in place, returns the findings it must cause


# --- byte-level editing ----------------------------------------------------------------------


def lines(path: Path) -> list[bytes]:
    """Physical lines split at LF (a CR stays on its line, as the validator reads them)."""
    return path.read_bytes().split(b"\n")


def write_lines(path: Path, parts: list[bytes]) -> None:
    path.write_bytes(b"\n".join(parts))


def line_of(path: Path, pid: str) -> int:
    """1-based JSONL line of ``pid``."""
    for number, line in enumerate(lines(path), start=1):
        if line.strip() and json.loads(line)["problem_id"] == pid:
            return number
    raise AssertionError(f"{pid} not in {path}")


def edit_record(path: Path, pid: str, change: Callable[[Record], Any]) -> int:
    """Re-serialise the JSONL line of ``pid`` after ``change(record)`` (its result is ignored);
    return the line."""
    def rewrite(line: bytes) -> bytes:
        record = json.loads(line)
        change(record)
        return json.dumps(record, ensure_ascii=False).encode()
    return edit_line(path, pid, rewrite)


def edit_line(path: Path, pid: str, change: Callable[[bytes], bytes]) -> int:
    """Replace the JSONL line of ``pid`` (without its CR) by ``change(line)``; return the line."""
    parts = lines(path)
    number = line_of(path, pid)
    old = parts[number - 1]
    cr = old.endswith(b"\r")
    parts[number - 1] = change(old.removesuffix(b"\r")) + (b"\r" if cr else b"")
    write_lines(path, parts)
    return number


def replacing(old: str, new: str) -> Callable[[bytes], bytes]:
    """A raw edit of a line's bytes, for what json.dumps cannot write (bad escapes, repeats)."""
    def change(line: bytes) -> bytes:
        assert old.encode() in line, old
        return line.replace(old.encode(), new.encode(), 1)
    return change


def setter(field: str, value: Any) -> Callable[[Record], None]:
    return lambda record: record.__setitem__(field, value)


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def write_csv(path: Path, header: list[str], records: list[dict[str, str]]) -> None:
    out = io.StringIO(newline="")
    # QUOTE_ALL: a field holding a lone CR must be quoted, or readers end the record there.
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writeheader()
    writer.writerows(records)
    path.write_text(out.getvalue(), encoding="utf-8", newline="")


def csv_line(path: Path, pid: str) -> int:
    """The physical line (LFs counted, nothing else) on which the first CSV record of ``pid``
    starts; found in the bytes, independently of any CSV reader (they count a lone CR too)."""
    found = re.search(rb'(?m)^"?' + re.escape(pid.encode()) + rb'"?,', path.read_bytes())
    assert found, f"{pid} not in {path}"
    return path.read_bytes().count(b"\n", 0, found.start()) + 1


def edit_csv(path: Path, pid: str, change: Callable[[dict[str, str]], None]) -> int:
    """Change the CSV record of ``pid`` (rewriting the file quoted); return its new start line."""
    header, records = read_csv(path)
    (target,) = [r for r in records if r["problem_id"] == pid]
    change(target)
    write_csv(path, header, records)
    return csv_line(path, pid)


def set_both(raw: Path, track: str, pid: str, field: str, value: Any) -> int:
    """The same change in JSONL and CSV, so the cross-check agrees and only the rule fires."""
    edit_csv(raw / f"{track}.csv", pid, setter(field, "" if value is None else str(value)))
    return edit_record(raw / f"{track}.jsonl", pid, setter(field, value))


# --- the faults --------------------------------------------------------------------------------

N_JSONL, N_CSV, P_JSONL, P_CSV = "RIMO-N.jsonl", "RIMO-N.csv", "RIMO-P.jsonl", "RIMO-P.csv"


def truncated_jsonl_last_line(raw: Path) -> list[Expect]:
    """A download cut off 100 bytes before the end: the last line is half a JSON object."""
    path = raw / P_JSONL
    data = path.read_bytes()
    last = data.rstrip(b"\n").split(b"\n")[-1]
    pid = json.loads(last)["problem_id"]
    number = data.rstrip(b"\n").count(b"\n") + 1
    path.write_bytes(data[:-100])
    return [Expect(P_JSONL, "json.parse", number, pid),
            Expect(P_CSV, "crosscheck.missing_row", None, pid)]


def truncated_jsonl_mid_character(raw: Path) -> list[Expect]:
    """Cut inside a multi-byte UTF-8 character of the last line: bad bytes and bad JSON."""
    path = raw / N_JSONL
    data = path.read_bytes()
    at = data.rindex("é".encode())  # the last 'é' of the file
    number = data.count(b"\n", 0, at) + 1
    path.write_bytes(data[:at + 1])  # keeps the first of its two bytes
    return [Expect(N_JSONL, "encoding.utf8", number), Expect(N_JSONL, "json.parse", number)]


def truncated_csv_in_quoted_field(raw: Path) -> list[Expect]:
    """A CSV cut inside the quoted text of its last record: the parser hits end of data."""
    path = raw / N_CSV
    data = path.read_bytes()
    path.write_bytes(data[:-300])
    end = data[:-300].count(b"\n") + 1
    return [Expect(N_CSV, "csv.parse", end, text="unexpected end of data"),
            Expect(N_CSV, "count.items", text="334 items")]


def mismatch_after_lone_crs(raw: Path) -> list[Expect]:
    """RIMO-N.csv has 20 lone CRs inside quoted fields before its last record; the finding
    must still name the record's physical line."""
    path = raw / N_CSV
    assert path.read_bytes().count(b"\r") > path.read_bytes().count(b"\r\n")
    line = edit_csv(path, "1959p2", lambda r: r.__setitem__("solution", r["solution"] + " !"))
    return [Expect(N_CSV, "crosscheck.mismatch", line, "1959p2", "solution:")]


def empty_jsonl(raw: Path) -> list[Expect]:
    (raw / N_JSONL).write_bytes(b"")
    return [Expect(N_JSONL, "count.items", text="0 items"),
            Expect(N_CSV, "crosscheck.missing_row", 2, "2023a1")]


def empty_csv(raw: Path) -> list[Expect]:
    """Nothing to cross-check against: file-level findings only, named by their message."""
    (raw / P_CSV).write_bytes(b"")
    return [Expect(P_CSV, "csv.header", text="no header row"),
            Expect(P_CSV, "count.items", text="0 items")]


def header_only_csv(raw: Path) -> list[Expect]:
    path = raw / P_CSV
    path.write_bytes(path.read_bytes().split(b"\n", 1)[0] + b"\n")
    return [Expect(P_JSONL, "crosscheck.missing_row", 1, "2023a2", "no row in RIMO-P.csv"),
            Expect(P_CSV, "count.items", text="0 items")]


def bom_mid_jsonl(raw: Path) -> list[Expect]:
    """Two files concatenated: a byte-order mark at the start of line 10."""
    path = raw / N_JSONL
    parts = lines(path)
    pid = json.loads(parts[9])["problem_id"]
    parts[9] = b"\xef\xbb\xbf" + parts[9]
    write_lines(path, parts)
    return [Expect(N_JSONL, "json.parse", 10, pid, "BOM")]


def double_bom_csv(raw: Path) -> list[Expect]:
    """One leading BOM is tolerated; a second one is part of the first column name."""
    path = raw / P_CSV
    path.write_bytes(b"\xef\xbb\xbf" * 2 + path.read_bytes())
    return [Expect(P_CSV, "csv.header", 1, text="missing ['problem_id']")]


def utf8_encoded_surrogate(raw: Path) -> list[Expect]:
    """CESU-8 style bytes (an encoded UTF-16 surrogate) are not UTF-8."""
    path = raw / P_CSV
    data = path.read_bytes()
    at = data.index(b"Let")
    path.write_bytes(data[:at] + b"\xed\xa0\x80" + data[at:])
    return [Expect(P_CSV, "encoding.utf8", data.count(b"\n", 0, at) + 1,
                   text=f"byte offset {at}")]


def lone_surrogate_escape(raw: Path) -> list[Expect]:
    """Valid UTF-8 bytes, valid JSON, but "\\ud83d" alone decodes to no character at all."""
    number = edit_line(raw / N_JSONL, "2023a5", replacing('"problem": "', '"problem": "\\ud83d'))
    return [Expect(N_JSONL, "encoding.utf8", number, "2023a5", "surrogate")]


def duplicate_id_csv(raw: Path) -> list[Expect]:
    header, records = read_csv(raw / P_CSV)
    pid = records[3]["problem_id"]
    write_csv(raw / P_CSV, header, [*records, dict(records[3])])
    first = csv_line(raw / P_CSV, pid)  # the first occurrence
    return [Expect(P_CSV, "id.unique", None, pid, f"duplicate of line {first}")]


def duplicate_id_other_content(raw: Path) -> list[Expect]:
    """A second RIMO-P row with the id of line 3 but another text: the first must not win
    silently."""
    path = raw / P_JSONL
    parts = lines(path)
    record = json.loads(parts[2])
    record["problem"] += " (revised)"
    body = b"\n".join(parts).rstrip(b"\n")
    path.write_bytes(body + b"\n" + json.dumps(record).encode() + b"\n")
    return [Expect(P_JSONL, "id.unique", body.count(b"\n") + 2, record["problem_id"],
                   "duplicate of line 3")]


def missing_problem_id(raw: Path) -> list[Expect]:
    number = edit_record(raw / N_JSONL, "2023c1", lambda r: r.pop("problem_id"))
    return [Expect(N_JSONL, "schema.required", number, text="'problem_id' is a required")]


def missing_nested_list(raw: Path) -> list[Expect]:
    number = edit_record(raw / P_JSONL, "2023a5", lambda r: r.pop("sub_problems"))
    return [Expect(P_JSONL, "schema.required", number, "2023a5", "sub_problems")]


def missing_csv_column(raw: Path) -> list[Expect]:
    header, records = read_csv(raw / N_CSV)
    for r in records:
        del r["type"]
    write_csv(raw / N_CSV, [h for h in header if h != "type"], records)
    return [Expect(N_CSV, "csv.header", 1, text="missing ['type']")]


def answer_as_number(raw: Path) -> list[Expect]:
    number = edit_record(raw / N_JSONL, "2023a1", setter("answer", 50))
    return [Expect(N_JSONL, "schema.type", number, "2023a1", "answer")]


def parts_as_float(raw: Path) -> list[Expect]:
    """2.0 is an integer to JSON Schema, but not a part count (it once crashed the stage)."""
    number = set_both(raw, "RIMO-P", "2023a3", "number_of_parts", 2.0)
    return [Expect(P_JSONL, "schema.type", number, "2023a3", "number_of_parts")]


def row_is_an_array(raw: Path) -> list[Expect]:
    number = edit_line(raw / P_JSONL, "2023g1",
                       lambda line: json.dumps(list(json.loads(line).values())).encode())
    return [Expect(P_JSONL, "schema.type", number, text="<row>: ['2023g1'")]


def nested_list_is_a_string(raw: Path) -> list[Expect]:
    number = edit_record(raw / P_JSONL, "2023a7", setter("sub_problems", "four parts"))
    return [Expect(P_JSONL, "schema.type", number, "2023a7", "sub_problems")]


def answer_fullwidth_digits(raw: Path) -> list[Expect]:
    """Fullwidth '50' passes a \\d+ test but no exact-match grader equals it to '50'."""
    number = set_both(raw, "RIMO-N", "2023a1", "answer", "\uff15\uff10")
    return [Expect(N_JSONL, "answer.integer", number, "2023a1")]


def answer_with_thousands_separator(raw: Path) -> list[Expect]:
    number = set_both(raw, "RIMO-N", "2023a5", "answer", "1,507")
    return [Expect(N_JSONL, "answer.integer", number, "2023a5")]


def answer_empty(raw: Path) -> list[Expect]:
    number = set_both(raw, "RIMO-N", "2023a2", "answer", "")
    return [Expect(N_JSONL, "answer.integer", number, "2023a2")]


def fewer_parts_than_present(raw: Path) -> list[Expect]:
    """number_of_parts 1 on a two-part item: the second sub-problem would be dropped."""
    number = set_both(raw, "RIMO-P", "2023a3", "number_of_parts", 1)
    return [Expect(P_JSONL, "parts.count", number, "2023a3", "sub-problem2 is present")]


def zero_parts(raw: Path) -> list[Expect]:
    number = set_both(raw, "RIMO-P", "2023g1", "number_of_parts", 0)
    return [Expect(P_JSONL, "parts.range", number, "2023g1")]


def nested_parts_out_of_order(raw: Path) -> list[Expect]:
    def swap(r: Record) -> None:
        r["sub_problems"][0], r["sub_problems"][1] = r["sub_problems"][1], r["sub_problems"][0]
    number = edit_record(raw / P_JSONL, "2023a5", swap)
    return [Expect(P_JSONL, "parts.nested", number, "2023a5", "index 2, expected 1")]


def empty_problem_n(raw: Path) -> list[Expect]:
    number = set_both(raw, "RIMO-N", "2023g6", "problem", "")
    return [Expect(N_JSONL, "text.nonempty", number, "2023g6", "problem is empty")]


def whitespace_problem_p(raw: Path) -> list[Expect]:
    number = set_both(raw, "RIMO-P", "2023a2", "problem", " \r\n\t ")
    return [Expect(P_JSONL, "text.nonempty", number, "2023a2", "problem is empty")]


def empty_sub_solution(raw: Path) -> list[Expect]:
    def clear(r: Record) -> None:
        r["sub-solution2"] = r["sub_problems"][1]["sub_solution"] = ""
    number = edit_record(raw / P_JSONL, "2023a3", clear)
    edit_csv(raw / P_CSV, "2023a3", setter("sub-solution2", ""))
    return [Expect(P_JSONL, "sub_solution.nonempty", number, "2023a3")]


def ten_times_the_rows(raw: Path) -> list[Expect]:
    """Every RIMO-N row ten times, in both files (an append loop gone wrong)."""
    for name in (N_JSONL, N_CSV):
        path = raw / name
        data = path.read_bytes()
        if name.endswith(".csv"):
            header, _, body = data.partition(b"\n")
            body = body if body.endswith(b"\n") else body + b"\r\n"
            path.write_bytes(header + b"\n" + body * 10)
        else:
            path.write_bytes(data * 10)
    return [Expect(N_JSONL, "count.items", text="3350 items"),
            Expect(N_CSV, "count.items", text="3350 items"),
            Expect(N_JSONL, "id.unique", 336, "2023a1", "duplicate of line 1")]


def ten_times_new_ids(raw: Path) -> list[Expect]:
    """4560 distinct, consistent, schema-valid RIMO-P items: only the count can tell."""
    jsonl, (header, records) = lines(raw / P_JSONL), read_csv(raw / P_CSV)
    rows = [json.loads(line) for line in jsonl if line.strip()]
    out_rows, out_records = [], []
    for copy in range(10):
        for row, record in zip(rows, records, strict=True):
            assert row["problem_id"] == record["problem_id"]
            pid = row["problem_id"] + (f"0{copy}" if copy else "")  # same year and letter
            out_rows.append({**row, "problem_id": pid})
            out_records.append({**record, "problem_id": pid})
    assert len({r["problem_id"] for r in out_rows}) == 4560
    (raw / P_JSONL).write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in out_rows))
    write_csv(raw / P_CSV, header, out_records)
    return [Expect(P_JSONL, "count.items", text="4560 items"),
            Expect(P_CSV, "count.items", text="4560 items")]


def duplicate_key(raw: Path) -> list[Expect]:
    """Two "answer" keys: json.loads would silently keep the second."""
    number = edit_line(raw / N_JSONL, "2023a1",
                       replacing('"answer": "50"', '"answer": "50", "answer": "51"'))
    return [Expect(N_JSONL, "json.duplicate_key", number, "2023a1", "'answer'")]


def nan_value(raw: Path) -> list[Expect]:
    number = edit_line(raw / P_JSONL, "2023a2",
                       replacing('"number_of_parts": 1', '"number_of_parts": NaN'))
    return [Expect(P_JSONL, "json.parse", number, "2023a2", "NaN")]


def deep_nesting(raw: Path) -> list[Expect]:
    """100 000 nested arrays: json.loads raises RecursionError (it once crashed the stage)."""
    path = raw / N_JSONL
    parts = lines(path)
    parts.insert(5, b"[" * 100_000)
    write_lines(path, parts)
    return [Expect(N_JSONL, "json.parse", 6, text="recursion"),
            Expect(N_JSONL, "count.items", text="336 items")]


def nul_byte(raw: Path) -> list[Expect]:
    number = edit_line(raw / N_JSONL, "2023n2", replacing('"problem": "', '"problem": "\x00'))
    return [Expect(N_JSONL, "json.parse", number, "2023n2", "control character")]


def blank_line_inside(raw: Path) -> list[Expect]:
    path = raw / P_JSONL
    parts = lines(path)
    parts.insert(100, b"")
    write_lines(path, parts)
    return [Expect(P_JSONL, "json.parse", 101, text="empty line"),
            Expect(P_JSONL, "count.items", text="457 items")]


def csv_extra_field(raw: Path) -> list[Expect]:
    """An unquoted comma in the answer: one field too many."""
    path = raw / P_CSV
    header, records = read_csv(path)
    write_csv(path, header, records)  # quoted throughout, so a raw edit is easy to place
    data = path.read_bytes()
    at = data.index(b'"2023a5",')
    path.write_bytes(data[:at] + b'"2023a5",stray,' + data[at + len(b'"2023a5",'):])
    return [Expect(P_CSV, "csv.row", csv_line(path, "2023a5"), "2023a5",
                   "fields, the header has 11")]


def csv_unbalanced_quote(raw: Path) -> list[Expect]:
    """A stray quote mid-file: the rest of the file would be one field."""
    path = raw / P_CSV
    header, records = read_csv(path)
    write_csv(path, header, records)
    start = csv_line(path, "2023c5")
    data = path.read_bytes()
    at = data.index(b'"2023c5","') + len(b'"2023c5","')
    path.write_bytes(data[:at] + b'x"y' + data[at:])
    return [Expect(P_CSV, "csv.parse", start, text="rest of file not read")]


FAULTS: list[Fault] = [
    Fault("truncated JSONL last line", truncated_jsonl_last_line),
    Fault("truncated inside a UTF-8 character", truncated_jsonl_mid_character),
    Fault("truncated CSV inside a quoted field", truncated_csv_in_quoted_field),
    Fault("CSV mismatch after lone CRs", mismatch_after_lone_crs),
    Fault("empty JSONL", empty_jsonl),
    Fault("empty CSV", empty_csv),
    Fault("CSV with only its header", header_only_csv),
    Fault("BOM in the middle of a JSONL", bom_mid_jsonl),
    Fault("two BOMs before a CSV header", double_bom_csv),
    Fault("UTF-8-encoded surrogate bytes", utf8_encoded_surrogate),
    Fault("lone surrogate escape", lone_surrogate_escape),
    Fault("duplicate id in CSV", duplicate_id_csv),
    Fault("duplicate id with other content", duplicate_id_other_content),
    Fault("missing problem_id", missing_problem_id),
    Fault("missing nested sub_problems", missing_nested_list),
    Fault("missing CSV column", missing_csv_column),
    Fault("answer is a number", answer_as_number),
    Fault("number_of_parts is 2.0", parts_as_float),
    Fault("row is an array", row_is_an_array),
    Fault("sub_problems is a string", nested_list_is_a_string),
    Fault("answer in fullwidth digits", answer_fullwidth_digits),
    Fault("answer with thousands separator", answer_with_thousands_separator),
    Fault("empty answer", answer_empty),
    Fault("fewer parts than present", fewer_parts_than_present),
    Fault("zero parts", zero_parts),
    Fault("nested parts out of order", nested_parts_out_of_order),
    Fault("empty RIMO-N problem", empty_problem_n),
    Fault("whitespace-only RIMO-P problem", whitespace_problem_p),
    Fault("empty sub-solution", empty_sub_solution),
    Fault("10x the rows", ten_times_the_rows),
    Fault("10x the items with new ids", ten_times_new_ids),
    Fault("duplicate JSON key", duplicate_key),
    Fault("NaN", nan_value),
    Fault("deeply nested JSON", deep_nesting),
    Fault("NUL byte in a string", nul_byte),
    Fault("blank line inside a JSONL", blank_line_inside),
    Fault("extra CSV field", csv_extra_field),
    Fault("unbalanced CSV quote", csv_unbalanced_quote),
]
