"""Score's diagnostic flags on crafted replies: the MathArena-style normalisation, the gold
search, and each flag both ways (tests/engine/test_diagnostics_run.py runs them through the
engine, predict and score)."""

from __future__ import annotations

from typing import Any

import pytest

from rimo_eval.score.diagnostics import FLAGS_N, flags_n, gold_in, lenient_equal, normalise


# --- normalisation -------------------------------------------------------------------------------
@pytest.mark.parametrize(("raw", "expected"), [
    ("215", "215"),
    (r"\text{215}", "215"),            # unwrapped: it holds the number
    (r"215\text{ ways}", "215"),       # a unit is dropped, as MathArena drops \text{}
    (r"\mathrm{215}", "215"),
    (r"\textbf{\mathrm{215}}", "215"),
    ("$215$", "215"),
    (r"\$215", "215"),
    ("1,000,000", "1000000"),
    ("1{,}000", "1000"),
    (r"1\,000", "1000"),
    (r"1\;000", "1000"),
    ("1\u202f000", "1000"),            # narrow no-break space
    ("1\u2009000", "1000"),            # thin space
    ("1 000", "1000"),
    ("215.", "215"),
    ("+215", "215"),
    (r"\boxed{215}", "215"),
    (r"\boxed{\boxed{7}}", "7"),
    (r"\fbox{7}", "7"),
    ("\u22125", "-5"),                 # a Unicode minus
    ("1,2", "1,2"),                    # not a thousands group: left alone
    ("12,34", "12,34"),
    (r"2^{2024}-1", r"2^{2024}-1"),
    (r"\boxed{7", r"\boxed{7"),        # unbalanced: left alone
])
def test_normalise(raw: str, expected: str) -> None:
    assert normalise(raw) == expected


@pytest.mark.parametrize(("pred", "gold", "same"), [
    ("215", "215", True),
    (r"\text{215}", "215", True),
    ("007", "7", True),                # the same integer, as int() reads it
    ("00", "0", True),
    ("+12", "12", True),
    ("1,011", "1011", True),
    ("12.", "12", True),
    ("-5", "5", False),
    ("12.5", "12", False),
    ("2^{10}", "1024", False),         # no evaluation: that is a judge's job
    ("", "0", False),
    (None, "0", False),
    ("21 5", "215", False),
    ("1,2", "12", False),
])
def test_lenient_equal(pred: str | None, gold: str, same: bool) -> None:
    assert lenient_equal(pred, gold) is same


@pytest.mark.parametrize(("text", "gold", "found"), [
    ("so the answer is 12.", "12", True),
    ("x = 1,011 in all", "1011", True),
    ("we get -5", "-5", True),
    ("we get 123", "12", False),
    ("we get 412", "12", False),
    ("p = 0.12", "12", False),
    ("12.5 is close", "12", False),
    ("we get -12", "12", False),
    ("no numbers", "12", False),
])
def test_gold_in_text(text: str, gold: str, found: bool) -> None:
    assert gold_in(text, gold) is found


# --- each flag, both ways ------------------------------------------------------------------------
def _flags(text: str | None, gold: str = "12", finish: str = "stop", status: str = "ok",
           prediction: str | None = None) -> dict[str, bool]:
    from rimo_eval.predictors.extract import extract_boxed
    details: dict[str, Any] = {} if text is None else {"text": text, "raw_text": text,
                                                        "finish_reason": finish}
    pred = prediction if prediction is not None or text is None else (extract_boxed(text) or "")
    correct = status == "ok" and pred is not None and pred.strip() == gold
    return flags_n(status, details, pred if status == "ok" else None, gold, correct)


def test_flags_of_a_clean_right_answer_are_all_off_but_lenient() -> None:
    assert _flags(r"so \boxed{12}.") == {f: f == "lenient_match" for f in FLAGS_N}


@pytest.mark.parametrize(("flag", "on", "off"), [
    ("no_box", "the answer is 12", r"the answer is \boxed{3}"),
    ("no_box", r"cut off \boxed{1", r"\boxed{}"),
    ("empty_box", r"put it inside \boxed{}.", r"inside \boxed{}: \boxed{3}"),
    ("multiple_boxes", r"\boxed{3} or \boxed{4}", r"\boxed{3} so \boxed{\text{3}}"),
    ("multiple_boxes", r"\boxed{3} or \boxed{5}", r"inside \boxed{} \boxed{3}"),
    ("gold_in_text", r"12 or so, \boxed{13}", r"\boxed{12}, as 12 is right"),
    ("gold_in_text", r"\boxed{\text{12}} since 12", r"\boxed{13} since 123"),
    ("lenient_match", r"\boxed{\text{12}}", r"\boxed{13}"),
    ("lenient_match", r"\boxed{12.}", r"\boxed{1.2}"),
])
def test_each_flag_both_ways(flag: str, on: str, off: str) -> None:
    assert _flags(on)[flag] is True, on
    assert _flags(off)[flag] is False, off


def test_truncated_is_the_finish_reason_whatever_was_extracted() -> None:
    assert _flags(r"\boxed{12} and then", finish="length")["truncated"]
    assert _flags(r"\boxed{}", finish="length")["truncated"]
    assert _flags("no box", finish="length")["truncated"]
    assert not _flags(r"\boxed{12}", finish="stop")["truncated"]
    # RIMO-P: any part cut off.
    from rimo_eval.score.diagnostics import truncated
    assert truncated({"finish_reason": "stop", "parts": [{"finish_reason": "length"},
                                                         {"finish_reason": "stop"}]})
    assert not truncated({"parts": [{"finish_reason": "stop"}]})


def test_rows_without_a_reply_have_no_text_flags() -> None:
    # A replay: a prediction and no text. Only lenient_match, and not_bare (LaTeX given as the
    # answer), can be said; a bare answer is not flagged.
    assert _flags(None, prediction=r"\text{12}") == {f: f in ("lenient_match", "not_bare")
                                                     for f in FLAGS_N}
    assert _flags(None, prediction="12") == {f: f == "lenient_match" for f in FLAGS_N}
    for status in ("missing", "error"):
        assert not any(_flags("the answer is 12", status=status).values())
