"""rimo-eval compare's flips (gold and both predictions, capped), params diff, counts table and
chart, on small real score tables made by the real predict (replay) and score stages."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rimo_eval.cli import build_parser
from rimo_eval.commands.compare.command import Side, compare_sides
from rimo_eval.commands.compare.details import attach_p_texts, params_diff, snippet
from rimo_eval.commands.compare.render import FLIPS, render_html, render_markdown
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import n_item, p_item
from tests.support.scored_runs import scored_side

N_ITEMS = [n_item(f"2001a{i}", str(i)) for i in range(1, 8)]
P_ITEMS = [p_item("2001g1", ["g1", "g2"]), p_item("2001n1", ["n1", "n2", "n3"])]


def side(root: Path, name: str, preds: list[tuple[str, str, Any]]
         ) -> tuple[Side, pd.DataFrame, pd.DataFrame]:
    run = scored_side(root, name, N_ITEMS, P_ITEMS, preds)
    return (run, pd.read_parquet(root / name / "preds/rimo_p.parquet"),
            pd.read_parquet(root / name / "items/rimo_p.parquet"))


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("details")
    # A right on 1..3 and 7, B right on 4..6 (7 missing): seven RIMO-N flips. RIMO-P: g1
    # lost, n1 gained.
    a, preds_a, items = side(root, "a", [
        *((TRACK_N, f"2001a{i}", str(i) if i <= 3 or i == 7 else "0") for i in range(1, 8)),
        (TRACK_P, "2001g1", ["g1", "g2"]), (TRACK_P, "2001n1", ["n1", "<b>x</b>", "n3"])])
    b, preds_b, _ = side(root, "b", [
        *((TRACK_N, f"2001a{i}", str(i) if i > 3 else " 9") for i in range(1, 7)),
        (TRACK_P, "2001g1", ["g1", "nope"]), (TRACK_P, "2001n1", ["n1", "n2", "n3"])])
    out = compare_sides(a, b, samples=100, seed=0, params=(
        {"predict": {"backend": "replay", "limit": 5, "replay": {"path": "a.jsonl"}}},
        {"predict": {"backend": "replay", "limit": None, "replay": {"path": "b.jsonl"}},
         "score": {"pass_at": [1]}}))
    attach_p_texts(out["tracks"][TRACK_P]["flips"], items, preds_a, preds_b)
    return out


def test_a_flip_shows_the_gold_and_both_predictions(result: dict[str, Any]) -> None:
    n = {f["problem_id"]: f for f in result["tracks"][TRACK_N]["flips"]}
    assert len(n) == 7
    assert (n["2001a1"]["gold"], n["2001a1"]["prediction_a"], n["2001a1"]["prediction_b"]) == (
        "1", "1", " 9")
    assert n["2001a7"]["prediction_b"] is None  # missing in B
    p = {f["problem_id"]: f for f in result["tracks"][TRACK_P]["flips"]}
    # The first part on which the two differ, with its reference and both candidates.
    assert p["2001g1"] == {**p["2001g1"], "matched_a": "✓✓", "matched_b": "✓✗", "part": 2,
                                "gold": "g2", "prediction_a": "g2", "prediction_b": "nope"}
    assert (p["2001n1"]["matched_a"], p["2001n1"]["part"], p["2001n1"]["prediction_a"]) == (
        "✓✗✓", 2, "<b>x</b>")
    md = render_markdown(result)
    assert "| 2001a1 | algebra | right | wrong | '1' | '1' | ' 9' |" in md
    assert "| 2001a7 | algebra | right | wrong | '7' | '7' | (none) |" in md
    assert "| 2001n1 | - | wrong ✓✗✓ | right ✓✓✓ | part 2: n2 | &lt;b>x&lt;/b> | n2 |" in md
    page = render_html(result)
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_flips_are_capped_unless_all_are_asked_for(result: dict[str, Any]) -> None:
    assert FLIPS == 20
    capped = render_markdown(result, cap=3)
    rows = [line for line in capped.splitlines() if line.startswith("| 2001a")]
    assert [r.split(" | ")[0] for r in rows] == ["| 2001a1", "| 2001a2", "| 2001a3"]
    assert "(first 3 of 7 by problem_id; --all-flips lists every one" in capped
    every = render_markdown(result, cap=None)
    assert sum(line.startswith("| 2001a") for line in every.splitlines()) == 7
    assert "--all-flips lists" not in every
    page = render_html(result, cap=3)
    assert page.count("<td class=\"\">2001a") == 3 and "first 3 of 7" in page
    args = build_parser().parse_args(["compare", "a", "b", "--all-flips"])
    assert args.all_flips and args.flips is None
    assert build_parser().parse_args(["compare", "a", "b", "--flips", "5"]).flips == 5


def test_params_diff_lists_only_what_differs(result: dict[str, Any]) -> None:
    assert result["params_diff"] == [
        {"param": "predict.limit", "a": 5, "b": None},
        {"param": "predict.replay.path", "a": "a.jsonl", "b": "b.jsonl"},
        {"param": "score.pass_at", "a": "-", "b": [1]}]
    md = render_markdown(result)
    assert "| predict.replay.path | a.jsonl | b.jsonl |" in md
    assert "| predict.limit | 5 | - |" in md
    assert params_diff({"a": 1}, None) == []
    assert "<caption>Params that differ</caption>" in render_html(result)


def test_html_counts_table_and_chart(result: dict[str, Any]) -> None:
    page = render_html(result)
    tables = re.findall(r"<table>(.*?)</table>", page, flags=re.S)
    metrics = next(t for t in tables if "CI of Δ" in t)
    counts = next(t for t in tables if "<th>count</th>" in t)
    assert "RIMO-N.accuracy" in metrics and "RIMO-N.correct" not in metrics
    assert "RIMO-N.correct" in counts and "RIMO-N.accuracy<" not in counts
    assert "<details><summary>Counts" in page
    uri = re.search(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert uri is not None
    png = base64.b64decode(uri.group(1))
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    assert "http" not in page.replace("http-equiv", "")  # nothing loads from anywhere
    assert render_html(result) == page  # same comparison, same bytes


def test_snippet_is_one_short_line() -> None:
    assert snippet("a\n  b\tc") == "a b c"
    long = snippet("x" * 200)
    assert len(long) == 80 and long.endswith("…")
    assert snippet(None) == ""
