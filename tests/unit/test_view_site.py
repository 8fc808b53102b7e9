"""``rimo-eval view`` without a browser: sanitising, sample codes, a byte-identical site.

The CLI on real experiments is tests/e2e/test_view_cli.py; the browser (Chromium) is
tests/e2e/test_view_browser.py.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.commands.view.markup import (
    FOLD_CHARS,
    PLAIN_CHARS,
    RENDER_CHARS,
    blocks,
    page_text,
    render,
)
from rimo_eval.commands.view.model import FLAGS, build, item_texts
from rimo_eval.commands.view.site import script, spill, write_site
from rimo_eval.core.tracks import TRACK_N, TRACK_P
from tests.support.factories import n_item, p_item, write_items
from tests.support.view_runs import HOSTILE, HOSTILE_TEXT, small_run


@pytest.mark.parametrize("payload", HOSTILE)
def test_markup_leaves_no_tag_attribute_or_url_of_the_payload(payload: str) -> None:
    html = render(payload)
    tags = set(re.findall(r"<\s*([a-zA-Z][a-zA-Z0-9]*)", html))
    assert tags <= {"p", "span", "div", "em", "strong", "code", "pre", "br"}, html
    assert not re.search(r"<[^>]*\s(on\w+|href|src|style|action|data)\s*=", html), html
    assert "<script" not in html and "<iframe" not in html and "<svg" not in html


def test_markup_keeps_math_apart_from_markdown() -> None:
    html = render("Let $a_1 *b* c_2$ and \\[x_1 = y_2\\] be *so*; $$\\frac{1}{2}$$")
    assert '<span class="math inline">a_1 *b* c_2</span>' in html
    assert '<span class="math display">x_1 = y_2</span>' in html
    assert "<em>so</em>" in html and "\\frac{1}{2}" in html
    assert render("<b>bold</b> [x](javascript:alert(1))") == \
        "<p>&lt;b&gt;bold&lt;/b&gt; [x](javascript:alert(1))</p>\n"


def small_items(root: Path) -> Path:
    items = root / "items"
    write_items(items, [n_item("2001a1", "12"), n_item("2001a2", "-3"),
                        n_item("2001c1", "7", "combinatorics")],
                [p_item("2001a1", ["s1"]), p_item("2001g1", ["g1", "g2"])])
    return items


def k3_rows(answers: dict[str, list[str]]) -> list[dict[str, Any]]:
    rows = [{"track": TRACK_N, "problem_id": pid, "sample": j, "prediction": a}
            for pid, preds in answers.items() for j, a in enumerate(preds)]
    rows += [{"track": TRACK_P, "problem_id": "2001a1", "sample": j, "prediction": ["s1"]}
             for j in range(3)]
    rows += [{"track": TRACK_P, "problem_id": "2001g1", "sample": j,
              "prediction": ["g1", "g2" if j else "no"]} for j in range(3)]
    return rows


def test_the_same_runs_give_a_byte_identical_site(tmp_path: Path) -> None:
    items = small_items(tmp_path)
    details = {(TRACK_N, "2001a1", 0): {"text": HOSTILE_TEXT + " so $\\boxed{12}$",
                                        "reasoning": "think $x$", "finish_reason": "stop",
                                        "usage": {"completion_tokens": 9}}}
    rows = k3_rows({"2001a1": ["12", "12", "13"], "2001a2": ["-3", "", "-3"],
                    "2001c1": ["1", "2", "7"]})
    digests = []
    for attempt in range(2):
        run = small_run(tmp_path / f"r{attempt}", "k3", items, rows, 3, details)
        index, payloads, words = build([run])
        out = tmp_path / f"site{attempt}"
        counts = write_site(out, index, payloads, words)
        assert counts["items"] == 5
        digests.append({p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                        for p in sorted(out.rglob("*")) if p.is_file()})
    assert digests[0] == digests[1]
    assert {"index.html", "app.js", "data/index.js", "data/items/00000.js",
            "katex/katex.min.js"} <= set(digests[0])
    # Rebuilding into the same folder replaces it whole: no file of the old site is left.
    (out / "stale.js").write_text("x")
    write_site(out, index, payloads, words)
    assert not (out / "stale.js").exists() and not list(tmp_path.glob(".site1.*"))


def test_index_codes_every_sample(tmp_path: Path) -> None:
    items = small_items(tmp_path)
    rows = k3_rows({"2001a1": ["12", "12", "13"], "2001a2": ["-3", "", "-3"]})  # 2001c1 missing
    details = {(TRACK_N, "2001a2", 1): {"text": "cut off", "finish_reason": "length"}}
    run = small_run(tmp_path, "k3", items, rows, 3, details)
    index, payloads, _ = build([run])
    codes = {it["key"]: it["o"][0] for it in index["items"]}
    assert codes == {"RIMO-N:2001a1": "RRW", "RIMO-N:2001a2": "RTR", "RIMO-N:2001c1": "MMM",
                     "RIMO-P:2001a1": "SSS", "RIMO-P:2001g1": "1SS"}
    (p,) = [p for p in payloads if p["key"] == "RIMO-N:2001a2"]
    # The score stage's flags: sample 1 was cut off (finish reason length) with no box.
    assert {"no_box", "truncated"} <= set(p["runs"][0][1]["flags"])
    assert "truncated" not in p["runs"][0][0]["flags"]
    # A scores table from before the diagnostic flags: truncated read from the finish reason.
    run.scores[TRACK_N] = run.scores[TRACK_N].drop(columns=[c for c in FLAGS
                                                            if c in run.scores[TRACK_N]])
    index, payloads, _ = build([run])
    flags = {it["key"]: it["f"][0] for it in index["items"]}
    assert flags["RIMO-N:2001a2"] == ["truncated"]
    assert {it["key"]: it["o"][0] for it in index["items"]} == codes
    (p,) = [p for p in payloads if p["key"] == "RIMO-N:2001a2"]
    assert [s["pred"] for s in p["runs"][0]] == ["-3", "", "-3"]
    assert index["runs"][0]["k"] == 3


def test_two_runs_errors_and_items_a_sample_run_left_out(tmp_path: Path) -> None:
    items = small_items(tmp_path)
    rows = k3_rows({"2001a1": ["12"] * 3, "2001a2": ["-3"] * 3, "2001c1": ["7"] * 3})
    full = small_run(tmp_path, "full", items, rows, 3)
    # An error as predict records it: status and reason in the predictions, wrong in scores.
    preds, scores = full.predictions[TRACK_N], full.scores[TRACK_N]
    hit = (preds["problem_id"] == "2001c1") & (preds["sample"] == 1)
    preds.loc[hit, "error"] = "HTTP 500 <b>boom</b>"
    scores.loc[(scores["problem_id"] == "2001c1") & (scores["sample"] == 1),
               ["status", "correct"]] = ["error", False]
    sample = small_run(tmp_path, "sample", items, rows, 3, limit=1)  # one item per track
    index, payloads, _ = build([full, sample])
    codes = {it["key"]: it["o"] for it in index["items"]}
    assert codes["RIMO-N:2001c1"][0] == "RER"
    assert sum(o[1] == "-" for o in codes.values()) == 3  # 5 items, 1 per track evaluated
    assert {k: o[1] for k, o in codes.items()} == {  # the seeded sample of one per track
        "RIMO-N:2001a1": "-", "RIMO-N:2001a2": "RRR", "RIMO-N:2001c1": "-",
        "RIMO-P:2001a1": "SSS", "RIMO-P:2001g1": "-"}
    (p,) = [p for p in payloads if p["key"] == "RIMO-N:2001c1"]
    assert p["runs"][0][1]["error"] == "HTTP 500 <b>boom</b>"  # plain text: app.js escapes it
    assert index["runs"][1]["is_sample"] is True and index["runs"][0]["is_sample"] is False
    assert set(index["pairs"]) == {"0-1"} and index["pairs"]["0-1"][TRACK_N]["k"] == 3


def test_a_long_text_is_folded_into_blocks_rendered_then_plain() -> None:
    """Issue 28 section 4: a 10 MB reply is never laid out whole, nor all parsed as Markdown."""
    assert page_text("short $x$") == render("short $x$")
    text = "".join(f"Paragraph {i} with $x_{{{i}}}$.\n\n" for i in range(40_000))
    folded = page_text(text)
    assert isinstance(folded, dict) and folded["chars"] == len(text)
    parts = blocks(text, FOLD_CHARS)
    assert "".join(parts) == text and all(len(p) <= FOLD_CHARS for p in parts)
    assert all(p.endswith("\n\n") for p in parts[:-1])  # cut at blank lines
    rendered, plain = folded["fold"], folded["plain"]
    assert sum(map(len, plain)) + folded["ends"][len(rendered) - 1] == len(text)
    assert folded["ends"][len(rendered) - 1] <= RENDER_CHARS
    assert all(len(p) <= PLAIN_CHARS for p in plain) and folded["ends"][-1] == len(text)
    assert rendered[0].startswith("<p>Paragraph 0 with <span class=\"math inline\">")
    assert text[folded["ends"][len(rendered) - 1]:].startswith(plain[0])
    # The site keeps the plain blocks out of the item's file: one script file each.
    payload, files = spill(7, {"runs": [[{"text": folded, "s": 0}]]})
    kept = payload["runs"][0][0]["text"]
    assert "plain" not in kept and kept["fold"] == rendered and len(kept["rest"]) == len(plain)
    assert [name for name, _ in files] == kept["rest"] == [
        f"data/rest/00007-{k:04d}.js" for k in range(len(plain))]
    assert files[0][1] == script("rest", kept["rest"][0], plain[0])
    # One line of 1 MB (no line break to cut at) is cut at the block size.
    line = "x" * 1_000_000
    folded = page_text(line)
    assert isinstance(folded, dict) and folded["ends"][0] == FOLD_CHARS
    assert "".join(folded["plain"]) == line[folded["ends"][len(folded["fold"]) - 1]:]


def test_upstream_text_with_doubled_backslashes_is_shown_as_source_and_marked() -> None:
    """Issue 28 section 6: the view shows what the model was shown, and marks the item."""
    item = {"problem": "Prove $x \\ge 0$.", "sub_problems": ["Show $\\{1, \\\\ldots, n\\}$.", "ok"],
            "sub_solutions": ["fine $x$", "Since $k \\\\cdot p$ and \x0crac"]}
    texts, warnings = item_texts(TRACK_P, item)
    assert texts["sub_problems"][0] == {"source": item["sub_problems"][0]}
    assert texts["sub_solutions"][1] == {"source": item["sub_solutions"][1]}
    assert texts["sub_problems"][1] == render("ok") and texts["problem"] == render(item["problem"])
    assert warnings == [{"rule": "text.control_char", "fields": ["sub-solution 2"]},
                        {"rule": "text.double_backslash",
                         "fields": ["sub-problem 1", "sub-solution 2"]}]
    assert item_texts(TRACK_N, {"problem": "p $x$", "solution": "s"})[1] == []


def test_index_lists_the_items_with_upstream_text_warnings(tmp_path: Path) -> None:
    items = tmp_path / "items"
    write_items(items, [n_item("2001a1", "12")],
                [p_item("2001g1", ["Thus $\\\\sum_k k$.", "g2"]), p_item("2001g2", ["g"])])
    rows = [{"track": TRACK_N, "problem_id": "2001a1", "prediction": "12"},
            {"track": TRACK_P, "problem_id": "2001g1", "prediction": ["a", "b"]},
            {"track": TRACK_P, "problem_id": "2001g2", "prediction": ["g"]}]
    index, payloads, _ = build([small_run(tmp_path, "w", items, rows, 1)])
    marked = {it["key"]: it.get("w") for it in index["items"]}
    assert marked == {"RIMO-N:2001a1": None, "RIMO-P:2001g1": ["text.double_backslash"],
                      "RIMO-P:2001g2": None}
    assert list(index["data_rules"]) == ["text.double_backslash"]
    (p,) = [p for p in payloads if p["key"] == "RIMO-P:2001g1"]
    assert p["data_warnings"] == [{"rule": "text.double_backslash", "fields": ["sub-solution 1"]}]
