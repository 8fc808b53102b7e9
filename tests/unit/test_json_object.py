"""One reader of a JSON object for every command: a broken or absent file is a DataError that
names it, whichever command reads it (issue 17 §6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rimo_eval.errors import DataError
from rimo_eval.io.json_object import parse_object, read_object
from rimo_eval.report import tables as T


@pytest.mark.parametrize("text, message", [
    ("{", r"x/metrics\.json: not valid JSON"),
    ("[1, 2]", r"x/metrics\.json: expected a JSON object, found list"),
    ("\xff", r"x/metrics\.json: not valid JSON"),
])
def test_bad_content_names_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x/metrics.json"
    path.parent.mkdir()
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(DataError, match=message):
        read_object(path, "x/metrics.json")


def test_a_missing_file_names_it_and_what_makes_it(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"judge\.json: not found \(run `dvc repro` first\)"):
        read_object(tmp_path / "judge.json", "judge.json", "run `dvc repro` first")


def test_the_report_reads_through_it(tmp_path: Path) -> None:
    """The report's reader raised a bare JSONDecodeError (a traceback in papermill)."""
    path = tmp_path / "validation.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError, match=r"validation\.json: not valid JSON"):
        T.read_json(path)


def test_parse_object_at_a_revision() -> None:
    assert parse_object(b'{"a": 1}', "m.json at HEAD") == {"a": 1}
    with pytest.raises(DataError, match=r"^m\.json at HEAD: expected a JSON object"):
        parse_object(b"3", "m.json at HEAD")
