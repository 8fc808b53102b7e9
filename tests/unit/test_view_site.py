"""``rimo-eval view`` without a browser: sanitising, sample codes, a byte-identical site.

The CLI on real experiments is tests/e2e/test_view_cli.py; the browser (Chromium) is
tests/e2e/test_view_browser.py.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rimo_eval.commands.view.model import FLAGS, build, item_texts
from rimo_eval.commands.view.packing import Text, decode, encode, pack, source, text
from rimo_eval.commands.view.site import write_site
from rimo_eval.commands.view.words import WORD, search_text
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import n_item, p_item, write_items
from tests.support.view_runs import HOSTILE_TEXT, small_run

ANY_TEXT = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF,
                                  categories=None), max_size=200)


@settings(max_examples=200, deadline=None)
@given(st.lists(ANY_TEXT, max_size=6), st.booleans())
def test_pack_ships_each_text_once_and_round_trips_it(values: list[str], as_source: bool
                                                      ) -> None:
    """Arbitrary Unicode (NUL, controls, astral, lone surrogates): each text comes back as it
    was, lone surrogates as U+FFFD and counted (UTF-8 cannot carry them); the same text twice
    is shipped once; and the bytes are the same every time."""
    payload = {"runs": [[{"text": source(v) if as_source and v else text(v), "s": i}
                         for i, v in enumerate(values)]], "pred": "not a Text"}
    packed, blob = pack(payload)
    assert (packed, blob) == pack(payload)  # deterministic
    texts = decode(blob)
    assert len(texts) == len(set(texts))
    assert packed["pred"] == "not a Text"
    for v, sample in zip(values, packed["runs"][0], strict=True):
        ref = sample["text"]
        if not v:
            assert ref is None
            continue
        fixed = v.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        assert texts[ref["t"]] == fixed
        assert ref.get("fixed", 0) == fixed.count("\ufffd") - v.count("\ufffd")
        assert ("fixed" in ref) == (fixed.count("\ufffd") > v.count("\ufffd"))
        assert ref.get("src") == (1 if as_source else None)


def test_pack_compresses_an_items_texts_together() -> None:
    """k samples of one item share their words: one stream for the item, well under the text."""
    rng = random.Random(7)
    words = [f"w{n}ord" for n in range(500)] + ["$x_1$", "the", "so", "and"]
    samples = [" ".join(rng.choice(words) for _ in range(5000)) for _ in range(8)]
    packed, blob = pack({"runs": [[{"text": text(s)} for s in samples]]})
    assert decode(blob) == samples and [r["text"]["t"] for r in packed["runs"][0]] == [*range(8)]
    assert len(blob) < 0.5 * sum(len(s) for s in samples)
    assert encode(["a"]) == encode(["a"]) and pack({"x": 1}) == ({"x": 1}, "")
    assert isinstance(text("x"), Text) and text("") is None and text(None) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=60) | st.text(st.characters(max_codepoint=127), max_size=60),
                max_size=5))
def test_search_words_are_the_words_of_every_text(texts: list[str]) -> None:
    """The ASCII fast path (bytes) finds the words the Unicode rule finds in the lower-cased
    text (as the page splits a query: lower case first, 'İ' is 'i' and a combining dot)."""
    want = {w for t in texts for w in WORD.findall(t.lower())}
    assert search_text(texts).split() == sorted(want)
    assert search_text(["İstanbul x_1 ÉTÉ", "plain ASCII Words_2"]).split() == [
        "1", "2", "ascii", "i", "plain", "stanbul", "words", "x", "été"]


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
            "katex/katex.min.js", "markdown.js", "vendor/markdown-it.min.js",
            "vendor/purify.min.js", "vendor/fzstd.min.js"} <= set(digests[0])
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


def test_upstream_text_with_doubled_backslashes_is_shown_as_source_and_marked() -> None:
    """Issue 28 section 6: the view shows what the model was shown, and marks the item."""
    item = {"problem": "Prove $x \\ge 0$.", "sub_problems": ["Show $\\{1, \\\\ldots, n\\}$.", "ok"],
            "sub_solutions": ["fine $x$", "Since $k \\\\cdot p$ and \x0crac"]}
    texts, warnings = item_texts(TRACK_P, item)
    assert texts["sub_problems"][0] == item["sub_problems"][0] and texts["sub_problems"][0].source
    assert texts["sub_solutions"][1] == item["sub_solutions"][1]
    assert texts["sub_solutions"][1].source and not texts["sub_problems"][1].source
    assert texts["problem"] == item["problem"] and not texts["problem"].source
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


def test_search_covers_answers_and_on_request_every_reasoning(tmp_path: Path) -> None:
    """By default the search words are the problem's and every answer's (a RIMO-N reply, a
    RIMO-P part); with search_reasoning, RIMO-N's reasoning and each RIMO-P part's too (the
    parts' reasoning was never searched before, though the docs said every model text)."""
    items = small_items(tmp_path)
    details = {(TRACK_N, "2001a1", 1): {"text": "replyword so $\\boxed{12}$",
                                        "reasoning": "zebraword thinking"},
               (TRACK_P, "2001g1", 2): {"parts": [{"reasoning": "quokkaword first"},
                                                  {"reasoning": "second"}]}}
    rows = k3_rows({"2001a1": ["12", "12", "13"], "2001a2": ["-3", "", "-3"],
                    "2001c1": ["1", "2", "7"]})
    run = small_run(tmp_path, "k3", items, rows, 3, details)

    def words(search_reasoning: bool) -> dict[str, set[str]]:
        index, _payloads, found = build([run], search_reasoning=search_reasoning)
        assert index["search_reasoning"] is search_reasoning
        return {it["key"]: set(w.split()) for it, w in zip(index["items"], found, strict=True)}

    plain, full = words(False), words(True)
    n, p = f"{TRACK_N}:2001a1", f"{TRACK_P}:2001g1"
    assert "replyword" in plain[n] and "g2" in plain[p]  # answers: always
    assert "zebraword" not in plain[n] and "quokkaword" not in plain[p]
    assert {"replyword", "zebraword"} <= full[n] and {"quokkaword", "second", "g2"} <= full[p]
    assert all(plain[k] <= full[k] for k in plain)
