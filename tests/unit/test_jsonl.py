"""The one JSONL reader: what it refuses, and that validate and replay both go through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rimo_eval.errors import StageError
from rimo_eval.io.jsonl import iter_lines, parse_line
from rimo_eval.predictors.replay import read_jsonl as read_replay
from rimo_eval.rimo.tracks import TRACK_N
from rimo_eval.validate.rawio import RawFile, read_jsonl


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": -Infinity}', "[" * 100_000, "{'a': 1}"])
def test_non_json_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_line(text)


def test_lines_split_at_lf_with_crlf_dropped() -> None:
    assert list(iter_lines('{"a":1}\r\n\n{"b":2}\n')) == [(1, '{"a":1}'), (2, ""), (3, '{"b":2}')]
    assert list(iter_lines("x")) == [(1, "x")]
    assert list(iter_lines("")) == []


def test_validate_and_replay_refuse_the_same_line(tmp_path: Path) -> None:
    line = '{"track": "RIMO-N", "problem_id": "2023a1", "prediction": NaN}'
    _, findings = read_jsonl(RawFile("RIMO-N.jsonl", f"{line}\n".encode(), "0" * 64, False),
                             TRACK_N)
    assert [(f.line, f.rule) for f in findings] == [(1, "json.parse")]
    assert "NaN is not valid JSON" in findings[0].message
    path = tmp_path / "replay.jsonl"
    path.write_text(f"\n{line}\n", encoding="utf-8")
    with pytest.raises(StageError, match=r"replay\.jsonl:2: rule replay\.json: NaN is not valid"):
        list(read_replay(path))
