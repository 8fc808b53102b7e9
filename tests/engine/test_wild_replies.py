"""Hostile text in model replies (issue 28, section 1), through the real engine: the openai
backend against the loopback chat server, then the predictions tables, score and the view.

A JSON string may carry a lone surrogate (``\\ud800``), which no UTF-8 file holds. It is made
valid once, where a reply enters the engine (``rimo_eval.chat.transport.ChatReply``): U+FFFD in its
place, the reply flagged ``unicode_repaired`` and kept, cached and graded, so a rerun sends
nothing. Everything else a server can send (NUL, C0 and C1 controls, bidi and zero-width
controls, 10 MB strings) is valid Unicode and is kept as it is, unflagged.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rimo_eval.artifacts.paths import items_path, predictions_path, scores_path
from rimo_eval.commands.view.load import Run
from rimo_eval.commands.view.model import build
from rimo_eval.commands.view.site import write_site
from rimo_eval.commands.view.texts import DetailsCursor
from rimo_eval.io.hashing import fingerprint
from rimo_eval.io.surrogates import is_valid
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.run.revision import Revision
from rimo_eval.score.stage import score
from tests.support.chat_server import ChatServer, Shaped
from tests.support.factories import predict_section, section, write_items

BOOT = section(ScoreParams, "score", bootstrap={"samples": 50, "seed": 0, "confidence": 0.95})
WILD = "[[wild]]"  # marks the items whose replies the server makes hostile
THOUGHT = "[[in_thought]]"  # ... in the reasoning field rather than the content


def n_row(pid: str, gold: str, extra: str = "") -> dict[str, Any]:
    row = {"track": TRACK_N, "problem_id": pid, "problem": f"Compute {pid}. [[gold:{gold}]]{extra}",
           "domain": "algebra", "number_of_parts": 1, "gradable": True,
           "ungradable_reason": None, "solution": "Because.", "answer": gold}
    return {**row, "content_hash": fingerprint(row)}


def p_row(pid: str, parts: int, extra: str = "") -> dict[str, Any]:
    row = {"track": TRACK_P, "problem_id": pid, "problem": f"Prove {pid}.{extra}",
           "domain": None, "number_of_parts": parts, "gradable": True,
           "ungradable_reason": None,
           "sub_problems": [f"{pid} part {i + 1}" for i in range(parts)],
           "sub_solutions": [f"ref {i + 1}" for i in range(parts)]}
    return {**row, "content_hash": fingerprint(row)}


def config(server: ChatServer, cache: Path | None, **extra: Any) -> dict[str, Any]:
    return {"backend": "openai", "limit": None, **extra,
            "openai": {"base_url": server.base_url, "model": "fake-model", "api_key_env": None,
                       "cache_dir": None if cache is None else str(cache), "timeout_s": 30.0,
                       "max_retries": 1, "backoff_initial_s": 0.01, "backoff_max_s": 0.05,
                       "concurrency": 4}}


def run_and_score(root: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    predict(predict_section(cfg), root / "items", root / "preds")
    return score(BOOT, root / "items", root / "preds", root / "scores", root / "metrics.json",
                 root / "plots")


def build_view(root: Path, metrics: dict[str, Any]) -> dict[str, int]:
    """The view of the run in ``root``, built and written as ``rimo-eval view`` does it."""
    cursors = {t: DetailsCursor(predictions_path(t, root / "preds"), t)
               for t in TRACKS}
    run = Run(Revision("wild", "git", "0" * 40), json.loads(json.dumps(metrics)),
              {t: pd.read_parquet(items_path(t, root / "items")) for t in TRACKS},
              {t: pd.read_parquet(predictions_path(t, root / "preds")) for t in TRACKS},
              {t: pd.read_parquet(scores_path(t, root / "scores")) for t in TRACKS},
              None, cursors)
    try:
        index, payloads, words = build([run])
        return write_site(root / "view", index, payloads, words)
    finally:
        run.close()


def rows(root: Path, track: str) -> dict[str, dict[str, Any]]:
    """The predictions table's rows by problem id, details parsed."""
    table = pq.read_table(predictions_path(track, root / "preds")).to_pylist()
    return {r["problem_id"]: {**r, "details": json.loads(r["details"])} for r in table}


def reply_text(row: dict[str, Any]) -> str:
    """A RIMO-N row's reply as sent: ``raw_text``, stored only where it differs from the answer
    text (``details.text``)."""
    return row["raw_text"] if row["raw_text"] is not None else row["details"]["text"]


# --- the property: any string in any field ----------------------------------------------------
# Lone surrogates of both halves, NUL, C0 and C1 controls, bidi and zero-width controls, BOM,
# noncharacters, astral characters, LaTeX that looks like an answer.
SPECIAL = ["\ud800", "\udfff", "\udc00\ud800", "\ud83d\ude00", "\x00", "\x01\x1b[31m\x7f",
           "\x85\x9f", "\u202e\u2066\u2069", "\u200b\u200d\ufeff", "\uffff\U0010ffff",
           "\\boxed{7}", "\\boxed{\ud800}", "</think>", ""]
ANY_CHAR = st.one_of(st.characters(),  # hypothesis leaves out surrogates (Cs) unless asked
                    st.characters(categories=["Cs"]))
HOSTILE = st.one_of(
    st.text(ANY_CHAR, max_size=40),
    st.lists(st.sampled_from(SPECIAL), min_size=1, max_size=4).map("".join))
# Where a server puts strings: the answer, both reasoning fields, the metadata the engine
# records, a key of the usage record, and fields it ignores.
FIELDS = ("content", "reasoning_content", "reasoning", "model", "finish_reason", "usage_key",
          "id", "system_fingerprint")
# NUL, C0 controls (DEL too), bidi and zero-width controls, and a lone surrogate: a 10 MB reply
# of them. (C1 controls, which the small examples carry, are left out of it: nh3, under the
# view's markup, takes time quadratic in their number, minutes at 10 MB; reported.)
TEN_MB = 10 * 2**20
CONTROLS = "\x00\x01\x08\x0b\x1b\x7f\u061c\u200e\u202a\u202e\u2066\u2069\u200b\ud800"


def shaped(values: dict[str, str]) -> Any:
    def shape(completion: dict[str, Any], prompt: str) -> Shaped:
        message = completion["choices"][0]["message"]
        for name, value in values.items():
            if name in ("content", "reasoning_content", "reasoning"):
                message[name] = value
            elif name == "finish_reason":
                completion["choices"][0]["finish_reason"] = value
            elif name == "usage_key":
                completion["usage"][value] = 5
            else:
                completion[name] = value
        return completion
    return shape


@pytest.fixture(scope="module")
def wild_server() -> Iterator[ChatServer]:
    srv = ChatServer(hang_s=60.0).start()
    yield srv
    srv.stop()


def goes_through(server: ChatServer, values: dict[str, str], rerun: bool = True) -> None:
    """Every reply of a RIMO-N item and a 2-part RIMO-P item carries ``values`` (field ->
    string): predict, the tables, score and the view take it, repair only what is invalid,
    flag only what they repaired, and keep the rest as sent; a rerun sends nothing and writes
    the same tables."""
    server.reset()
    server.shape = shaped(values)
    try:
        with tempfile.TemporaryDirectory(prefix="wild-") as tmp:
            root = Path(tmp)
            write_items(root / "items", [n_row("n1", "7")], [p_row("p1", 2)])
            cfg = config(server, root / "cache")
            metrics = run_and_score(root, cfg)
            counts = build_view(root, metrics)
            n, p = rows(root, TRACK_N)["n1"], rows(root, TRACK_P)["p1"]
            sent = len(server.records)
            if rerun:
                predict(predict_section(cfg), root / "items", root / "again")
                assert len(server.records) == sent  # cached as stored: a rerun sends nothing
                for track in TRACKS:
                    assert predictions_path(track, root / "again").read_bytes() == \
                        predictions_path(track, root / "preds").read_bytes()
    finally:
        server.shape = None
    assert counts["items"] == 2 and sent == 3
    assert (n["status"], p["status"]) == ("ok", "ok"), (n["error"], p["error"])
    # What a client decodes: JSON joins an escaped high and low surrogate, in that order, into
    # the one character they encode (\ud800\udc00 is U+10000); the rest stay lone.
    received = {k: json.loads(json.dumps(v)) for k, v in values.items()}
    sent_bad = any(not is_valid(v) for v in received.values())
    flagged = n["details"].get("unicode_repaired") is True
    assert not flagged or sent_bad  # a flag only where something was repaired
    content = received.get("content")
    if content is not None:  # the reply as sent
        kept = reply_text(n)
        if is_valid(content):  # kept as it is, NUL and controls included
            assert kept == content
        else:  # repaired, and flagged
            assert flagged and "\ufffd" in kept and is_valid(kept)
            assert len(kept) <= len(content)
    assert metrics[TRACK_N]["diagnostics"]["unicode_repaired"] == int(flagged)
    assert metrics[TRACK_N]["n"] == 1 and metrics[TRACK_P]["n"] == 1


@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=st.dictionaries(st.sampled_from(FIELDS), HOSTILE, min_size=1, max_size=4))
@example(values={"content": "\ud800", "reasoning_content": "\udfff", "model": "\udc00"})
@example(values={"content": "".join(SPECIAL), "finish_reason": "length"})
@example(values={"content": "\ud800\udc00"})  # a pair: U+10000, valid
def test_any_string_in_any_reply_field_goes_through(wild_server: ChatServer,
                                                    values: dict[str, str]) -> None:
    goes_through(wild_server, values)


@pytest.mark.slow
def test_ten_megabyte_replies_go_through(wild_server: ChatServer) -> None:
    """The property's explicit 10 MB example (a test of its own, so that the edit loop can
    leave it out): answers of 10 MB of text strewn with controls and lone surrogates, quoted
    whole by the next RIMO-P part's prompt. (Its rerun is the small examples' business.)"""
    unit = "So the sum is odd, hence n is prime. " * 4 + CONTROLS
    goes_through(wild_server, {"content": unit * (TEN_MB // len(unit)) + "\\boxed{7}"},
                 rerun=False)


# --- targeted regressions -----------------------------------------------------------------------
def wild_replies(completion: dict[str, Any], prompt: str) -> Shaped:
    """A lone surrogate in the content of one marked item, in the reasoning of another, and in
    every reply of a marked RIMO-P item (whose next part quotes the repaired answer)."""
    if WILD not in prompt:
        return None
    message = completion["choices"][0]["message"]
    if THOUGHT in prompt:
        message["reasoning_content"] = "Hmm \ud800 let me think \udfff."
    else:
        message["content"] = "Broken \ud800 half " + message["content"]
    return completion


def wild_benchmark(items: Path) -> None:
    """20 RIMO-N items (2 marked: 10% of them) and 3 RIMO-P items of 2 parts (1 marked)."""
    marks = {0: f" {WILD}", 10: f" {WILD} {THOUGHT}"}
    write_items(items, [n_row(f"n{i:02d}", str(i * 7), marks.get(i, "")) for i in range(20)],
                [p_row(f"p{i}", 2, f" {WILD}" if i == 0 else "") for i in range(3)])


def check_graded_and_flagged(root: Path, metrics: dict[str, Any]) -> None:
    n, p = rows(root, TRACK_N), rows(root, TRACK_P)
    assert {r["status"] for r in [*n.values(), *p.values()]} == {"ok"}
    assert metrics[TRACK_N]["accuracy"] == 1.0  # every item graded, the repaired ones right
    assert metrics[TRACK_N]["diagnostics"]["unicode_repaired"] == 2
    assert metrics[TRACK_P]["diagnostics"]["unicode_repaired"] == 1
    assert {pid for pid, r in n.items() if r["details"].get("unicode_repaired")} == {"n00",
                                                                                  "n10"}
    assert n["n00"]["prediction"] == "0" and "Broken \ufffd half" in reply_text(n["n00"])
    assert n["n10"]["reasoning"] == "Hmm \ufffd let me think \ufffd."
    assert [d.get("unicode_repaired") for d in p["p0"]["details"]["parts"]] == [True, True]
    assert p["p0"]["prediction"][0].startswith("Broken \ufffd half")
    scores = pd.read_parquet(scores_path(TRACK_N, root / "scores")).set_index("problem_id")
    assert sorted(scores.index[scores["unicode_repaired"]]) == ["n00", "n10"]


@pytest.mark.chat_server(hang_s=60.0)
def test_lone_surrogates_in_a_tenth_of_the_replies(server: ChatServer, tmp_path: Path) -> None:
    """The run completes and grades every item, flags the repaired replies, caches them, and
    its rerun sends nothing (it used to exit 1 at the cache write, run after run)."""
    server.shape = wild_replies
    wild_benchmark(tmp_path / "items")
    cfg = config(server, tmp_path / "cache")
    metrics = run_and_score(tmp_path, cfg)
    check_graded_and_flagged(tmp_path, metrics)
    sent = len(server.records)
    assert sent == 20 + 3 * 2
    tables = {t: predictions_path(t, tmp_path / "preds").read_bytes() for t in TRACKS}
    again = run_and_score(tmp_path, cfg)
    assert len(server.records) == sent  # the rerun sent nothing: the repaired replies are cached
    assert {t: predictions_path(t, tmp_path / "preds").read_bytes() for t in TRACKS} == tables
    assert again[TRACK_N]["diagnostics"] == metrics[TRACK_N]["diagnostics"]


@pytest.mark.chat_server(hang_s=60.0)
def test_lone_surrogates_without_a_cache_and_a_next_part_quoting_one(server: ChatServer,
                                                                    tmp_path: Path) -> None:
    """``cache_dir: null``: the next RIMO-P part's prompt quotes the repaired answer (its
    fingerprint used to fail), and the reasoning reaches the table (pyarrow used to fail)."""
    server.shape = wild_replies
    wild_benchmark(tmp_path / "items")
    metrics = run_and_score(tmp_path, config(server, None))
    check_graded_and_flagged(tmp_path, metrics)
    second = [r for r in server.records if "p0 part 2" in r.prompt]
    assert len(second) == 1
    quoted = json.dumps(second[0].body, ensure_ascii=False)
    assert "Broken \ufffd half" in quoted and "\\ud800" not in json.dumps(second[0].body)
    assert not (tmp_path / "cache").exists()


@pytest.mark.chat_server(hang_s=60.0)
def test_a_server_error_holding_a_lone_surrogate_is_that_items_error(server: ChatServer,
                                                                    tmp_path: Path) -> None:
    def shape(completion: dict[str, Any], prompt: str) -> Shaped:
        if WILD in prompt:
            return 400, {"error": {"message": "bad \ud800 input", "type": "invalid_request"}}
        return None

    server.shape = shape
    wild_benchmark(tmp_path / "items")
    metrics = run_and_score(tmp_path, config(server, tmp_path / "cache", allow_errors=0.5))
    n = rows(tmp_path, TRACK_N)
    assert n["n00"]["status"] == "error" and "bad \ufffd input" in n["n00"]["error"]
    assert n["n00"]["details"]["unicode_repaired"] is True
    assert metrics[TRACK_N]["errors"] == 2 and metrics[TRACK_N]["correct"] == 18
    assert metrics[TRACK_N]["diagnostics"]["unicode_repaired"] == 2


@pytest.mark.chat_server(hang_s=60.0)
def test_bytes_that_are_not_utf8_are_repaired_not_retried(server: ChatServer,
                                                         tmp_path: Path) -> None:
    """A body with raw bytes that are not UTF-8 (half a character) is a reply, not garbage."""
    def shape(completion: dict[str, Any], prompt: str) -> Shaped:
        if WILD not in prompt:
            return None
        completion["choices"][0]["message"]["content"] = "@@HALF@@ \\boxed{0}"
        return json.dumps(completion).encode().replace(b"@@HALF@@", b"caf\xc3 \xff")

    server.shape = shape
    write_items(tmp_path / "items", [n_row("n00", "0", f" {WILD}")], [])
    metrics = run_and_score(tmp_path, config(server, tmp_path / "cache"))
    n = rows(tmp_path, TRACK_N)["n00"]
    assert (n["status"], n["prediction"]) == ("ok", "0")
    assert reply_text(n).startswith("caf\ufffd \ufffd ") and n["details"]["unicode_repaired"]
    assert len(server.records) == 1 and metrics[TRACK_N]["diagnostics"]["unicode_repaired"] == 1


@pytest.mark.chat_server(hang_s=60.0)
def test_usage_counters_that_are_no_token_counts_are_left_out_and_flagged(server: ChatServer,
                                                                         tmp_path: Path) -> None:
    """A server's negative, fractional, boolean or absurd token counts used to be summed as
    sent: a negative or 10^30-token total and cost, with no word said."""
    bad = {"n00": -5, "n01": 10**30, "n02": 1.5, "n03": True}

    def shape(completion: dict[str, Any], prompt: str) -> Shaped:
        for pid, value in bad.items():
            if f"Compute {pid}." in prompt:
                completion["usage"]["prompt_tokens"] = value
        return None

    server.shape = shape
    wild_benchmark(tmp_path / "items")
    metrics = run_and_score(tmp_path, config(server, tmp_path / "cache"))
    n = rows(tmp_path, TRACK_N)
    assert {pid for pid, r in n.items() if r["details"].get("usage_dropped")} == set(bad)
    assert all(n[pid]["details"]["usage"]["prompt_tokens"] == 0 for pid in bad)  # unknown
    assert metrics[TRACK_N]["diagnostics"]["usage_dropped"] == len(bad)
    assert metrics[TRACK_N]["accuracy"] == 1.0  # the replies themselves are graded as ever
    good = sum(r["details"]["usage"]["prompt_tokens"] for pid, r in n.items() if pid not in bad)
    assert 0 < metrics[TRACK_N]["usage"]["prompt_tokens"] == good
