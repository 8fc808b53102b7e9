"""The data-quality checks of stored item text (rimo_eval/rimo/text_quality.py), which validate
reports as warnings and `rimo-eval view` marks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rimo_eval.rimo.text_quality import WARNING_RULES, doubled_backslashes, text_warnings


def test_a_doubled_backslash_before_a_command_is_found_and_named() -> None:
    message = doubled_backslashes("of $\\{1, \\\\ldots, n\\}$: $\\\\sum k \\\\cdot p + \\\\sum$")
    assert message is not None
    assert message.startswith("4x (\\\\sum, \\\\cdot, \\\\ldots)"), message
    assert "first at '" in message


def test_line_breaks_are_not_doubled_commands() -> None:
    # A LaTeX line break, then a command ('\\\hline'), then text after a spaced break.
    for ok in ("a \\\\ b", "a \\\\\\hline b", "a\\\\[2mm] b", "\\ldots \\sum", "x \\\\\n y"):
        assert doubled_backslashes(ok) is None, ok
    assert doubled_backslashes("a \\\\\\\\ldots") is not None  # four: still a doubled escape


def test_control_characters_and_the_rules_named() -> None:
    assert text_warnings("$\x0crac{a}{b}$") == [
        ("text.control_char", "U+000C (1x), first at '$\\x0crac{a}{b}$'")]
    assert set(WARNING_RULES) == {"text.control_char", "text.double_backslash"}


@given(st.text())
def test_any_text_is_checked_without_an_error(text: str) -> None:
    for rule, message in text_warnings(text):
        assert rule in WARNING_RULES and message
