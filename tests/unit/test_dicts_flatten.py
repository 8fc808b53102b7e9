"""One flattener (rimo_eval.artifacts.flat_keys) for audit's metric names and the report's
tables."""

from __future__ import annotations

from rimo_eval.artifacts.flat_keys import flatten
from rimo_eval.report import tables as T


def test_audit_keeps_order_and_empty_sections() -> None:
    assert flatten({"b": {"y": 1, "x": {}}, "a": 2}) == {"b.y": 1, "b.x": {}, "a": 2}


def test_sorted_per_level_without_empty_sections() -> None:
    data = {"a-b": 1, "a": {"x": [1, 2], "e": {}}, "c": {"n": None}}
    # Per level: "a" sorts before "a-b", so its children come first ("a.x" < "a-b" is false
    # as flat strings: a flat sort would put "a-b" first).
    assert list(flatten(data, sort=True, keep_empty=False)) == ["a.x", "a-b", "c.n"]


def test_report_rows_are_json_scalars() -> None:
    assert T.flatten({"z": "text", "m": {"k": [1, 2], "n": None, "t": True}}) == [
        ("m.k", "[1,2]"), ("m.n", "null"), ("m.t", "true"), ("z", "text")]
