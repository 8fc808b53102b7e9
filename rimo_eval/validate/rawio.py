"""Reading the raw upstream files into rows with line numbers, reporting what cannot be read.

Unreadable input becomes findings (with file, line and byte offset) rather than exceptions, so
one run reports every problem. A UTF-8 byte-order mark at the start of a file is tolerated:
it is dropped and recorded in the input summary (``bom: true``). A missing file is a
StageError, as nothing can be checked without it.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rimo_eval.errors import DataError
from rimo_eval.io.hashing import sha256_bytes
from rimo_eval.io.jsonl import noting_repeats, parse_line
from rimo_eval.validate.rules import Finding, show

BOM = b"\xef\xbb\xbf"
_PID = re.compile(r'"problem_id"\s*:\s*"([^"\\]*)"')
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # only these can decode to a surrogate


@dataclass(frozen=True)
class RawFile:
    """One input file: its bytes (BOM removed) and what the report says about it."""

    name: str
    data: bytes
    sha256: str  # of the file as found, BOM included
    bom: bool

    def summary(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "bytes": len(self.data) + (len(BOM) if self.bom else 0),
                "bom": self.bom, "line_endings": line_endings(self.data)}


@dataclass(frozen=True)
class JsonlRow:
    line: int
    record: Any  # None when the line did not parse
    problem_id: str | None


@dataclass
class CsvTable:
    header: list[str] = field(default_factory=list)
    rows: list[tuple[int, dict[str, str]]] = field(default_factory=list)  # (start line, record)


def read_raw(raw_dir: Path, names: list[str]) -> dict[str, RawFile]:
    """All named files, or one StageError naming every file that is missing."""
    missing = [n for n in names if not (raw_dir / n).is_file()]
    if missing:
        raise DataError(f"{raw_dir}: missing input file(s): {', '.join(missing)} "
                         "(run the fetch stage first)")
    files = {}
    for name in names:
        try:
            data = (raw_dir / name).read_bytes()
        except OSError as exc:
            raise DataError(f"{raw_dir / name}: cannot read: {exc}") from exc
        bom = data.startswith(BOM)
        files[name] = RawFile(name, data[len(BOM):] if bom else data, sha256_bytes(data), bom)
    return files


def line_endings(data: bytes) -> str:
    lf, crlf = data.count(b"\n"), data.count(b"\r\n")
    if not lf:
        return "none"
    return "crlf" if crlf == lf else ("lf" if not crlf else "mixed")


def decode_lines(raw: RawFile, track: str) -> tuple[list[str], list[Finding]]:
    """Physical lines (split at LF only, CR kept) decoded one by one, so a bad byte is
    reported with its line and byte offset and the rest of the file is still checked."""
    lines, findings = [], []
    offset = len(BOM) if raw.bom else 0
    for number, chunk in enumerate(raw.data.split(b"\n"), start=1):
        try:
            lines.append(chunk.decode("utf-8"))
        except UnicodeDecodeError as exc:
            text = chunk.decode("utf-8", errors="replace")
            pid = _PID.search(text)
            findings.append(Finding(
                raw.name, number, track, pid.group(1) if pid else None, "encoding.utf8",
                f"invalid UTF-8 at byte offset {offset + exc.start} ({exc.reason})"))
            lines.append(text)
        offset += len(chunk) + 1
    return lines, findings


def read_jsonl(raw: RawFile, track: str) -> tuple[list[JsonlRow], list[Finding]]:
    lines, findings = decode_lines(raw, track)
    if lines and lines[-1] == "":
        lines.pop()  # the terminator of the last line, not an empty line
    rows = []
    for number, text in enumerate(lines, start=1):
        text = text.removesuffix("\r")
        row, errs = _parse_line(raw.name, track, number, text)
        rows.append(row)
        findings += errs
    return rows, findings


def _parse_line(name: str, track: str, number: int, text: str
                ) -> tuple[JsonlRow, list[Finding]]:
    guess = _PID.search(text)
    pid = guess.group(1) if guess else None
    if not text.strip():
        return JsonlRow(number, None, None), [
            Finding(name, number, track, None, "json.parse", "empty line")]
    dups: list[str] = []
    try:
        record = parse_line(text, object_pairs_hook=noting_repeats(dups))
    except ValueError as exc:
        return JsonlRow(number, None, pid), [
            Finding(name, number, track, pid, "json.parse", f"invalid JSON: {exc}")]
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(record):
        # A \ud800-style escape without its pair decodes to a string no UTF-8 file can hold.
        return JsonlRow(number, None, pid), [
            Finding(name, number, track, pid, "encoding.utf8",
                    "a \\u escape is an unpaired UTF-16 surrogate, not a character")]
    if isinstance(record, dict) and isinstance(record.get("problem_id"), str):
        pid = record["problem_id"]
    findings = [Finding(name, number, track, pid, "json.duplicate_key",
                        f"key {key!r} occurs more than once", key) for key in sorted(set(dups))]
    return JsonlRow(number, record, pid), findings


def _has_lone_surrogate(record: Any) -> bool:
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def read_csv(raw: RawFile, track: str, columns: tuple[str, ...]
             ) -> tuple[CsvTable, list[Finding]]:
    """Records keyed by header name, each with the line it starts on."""
    lines, findings = decode_lines(raw, track)
    # One LF-terminated physical line per item, so reader.line_num counts LFs only (from a
    # StringIO it would also count each lone CR inside a quoted field as a line).
    source = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    reader = csv.reader(source, strict=True)
    table = CsvTable()
    last_line = 0
    try:
        for record in reader:
            start, last_line = last_line + 1, reader.line_num
            if not table.header:
                table.header = record
                findings += _header_findings(raw.name, track, record, columns)
                continue
            row, errs = _csv_record(raw.name, track, start, table.header, record)
            findings += errs
            if row is not None:
                table.rows.append((start, row))
    except csv.Error as exc:
        findings.append(Finding(raw.name, reader.line_num, track, None, "csv.parse",
                                f"cannot parse CSV: {exc} (rest of file not read)"))
    if not table.header:
        findings.append(Finding(raw.name, None, track, None, "csv.header", "no header row"))
    return table, findings


def _header_findings(name: str, track: str, header: list[str], columns: tuple[str, ...]
                     ) -> list[Finding]:
    missing = [c for c in columns if c not in header]
    extra = [c for c in header if c not in columns]
    repeated = sorted({c for c in header if header.count(c) > 1})
    if not (missing or extra or repeated):
        return []
    return [Finding(name, 1, track, None, "csv.header",
                    f"header {show(header)}: missing {missing}, unexpected {extra}, "
                    f"repeated {repeated}")]


def _csv_record(name: str, track: str, line: int, header: list[str], record: list[str]
                ) -> tuple[dict[str, str] | None, list[Finding]]:
    at = header.index("problem_id") if "problem_id" in header else len(record)
    pid = record[at] if at < len(record) else None
    if len(record) != len(header):
        return None, [Finding(name, line, track, pid or None, "csv.row",
                              f"{len(record)} fields, the header has {len(header)}")]
    return dict(zip(header, record, strict=True)), []
