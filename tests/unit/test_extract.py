"""The RIMO-N answer extractor: unit cases and property-based fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rimo_eval.chat.reasoning import split_think
from rimo_eval.predictors.extract import extract_boxed


@pytest.mark.parametrize(("text", "expected"), [
    (r"so \boxed{42}", "42"),
    (r"\boxed{2^{10}}", "2^{10}"),
    (r"first \boxed{1} then \boxed{2}", "2"),
    (r"\boxed {7}", "7"),
    ("\\boxed\n{7}", "7"),
    (r"\boxed{  -3 }", "-3"),
    (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
    (r"\boxed{\boxed{3}}", r"\boxed{3}"),  # the outer box wins
    (r"\boxed{\{1,2\}}", r"\{1,2\}"),
    (r"\boxed{}", ""),
    (r"\boxed{1,\ 000}", r"1,\ 000"),  # nothing normalised but surrounding whitespace
    (r"\boxed{5} and a truncated \boxed{6", "5"),  # an unclosed box is skipped
    (r"\boxed{a \boxed{b}", "b"),
    (r"$$\boxed{12}$$.", "12"),
    (r"\\boxed{9}", "9"),  # doubled backslash, as in JSON-escaped replies
    (r"text } stray { braces \boxed{8}", "8"),
])
def test_cases(text: str, expected: str) -> None:
    assert extract_boxed(text) == expected


@pytest.mark.parametrize("text", [
    None, "", "no box here", r"\boxed", r"\boxed{", r"\boxed{1", r"\boxed 5", r"\boxedx{5}",
    r"\fbox{5}", "boxed{5}", r"\boxed}{",
])
def test_no_answer(text: str | None) -> None:
    assert extract_boxed(text) is None


def test_linear_time_on_adversarial_input() -> None:
    text = r"\boxed{" * 50_000 + "x"
    assert extract_boxed(text) is None
    assert extract_boxed(text + "}") == "x"  # only the innermost box is closed


_ATOMS = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=8)


def _balanced() -> st.SearchStrategy[str]:
    """Strings in which every brace is matched (naive counting, as the extractor counts)."""
    return st.recursive(
        _ATOMS | st.sampled_from([r"\boxed", "\\", " ", "boxed", r"\frac"]),
        lambda inner: st.one_of(
            st.builds(lambda s: "{" + s + "}", inner),
            st.builds(lambda s: r"\boxed{" + s + "}", inner),
            st.builds(lambda a, b: a + b, inner, inner),
        ),
        max_leaves=12,
    )


@settings(max_examples=400, deadline=None)
@given(_balanced())
def test_round_trip(s: str) -> None:
    assert extract_boxed("... \\boxed{" + s + "}") == s.strip()


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["{", "}", "\\", "boxed", " ", "\n", "x", "\\boxed{"]),
                max_size=60).map("".join) | st.text(max_size=200))
def test_never_crashes(text: str) -> None:
    result = extract_boxed(text)
    assert result is None or (isinstance(result, str) and result == result.strip())


@settings(max_examples=200, deadline=None)
@given(_balanced(), _balanced(), st.text(max_size=30).filter(lambda t: "boxed" not in t))
def test_last_box_wins(a: str, b: str, tail: str) -> None:
    text = r"\boxed{" + a + "} then " + r"\boxed{" + b + "}" + tail.replace("{", "").replace(
        "}", "")
    assert extract_boxed(text) == b.strip()


@pytest.mark.parametrize(("text", "reasoning", "answer"), [
    ("<think>\nguess \\boxed{7}\n</think>\n\nSo \\boxed{42}.", "guess \\boxed{7}",
     "So \\boxed{42}."),
    # The chat template pre-filled <think>: only the close tag is in the reply.
    ("guess \\boxed{7}</think>So \\boxed{42}.", "guess \\boxed{7}", "So \\boxed{42}."),
    # Cut off while thinking: all reasoning, no answer.
    ("<think>First \\boxed{7}, but", "First \\boxed{7}, but", ""),
    # Everything up to the last close tag is reasoning.
    ("<think>a</think>b</think>c", "a</think>b", "c"),
    # No leading block: the reply is all answer, even if a tag appears later.
    ("Answer \\boxed{3}. <think>x</think> y", None, "Answer \\boxed{3}. <think>x</think> y"),
    ("Plain \\boxed{5}", None, "Plain \\boxed{5}"),
])
def test_split_think(text: str, reasoning: str | None, answer: str) -> None:
    assert split_think(text, "<think>", "</think>") == (reasoning, answer)
