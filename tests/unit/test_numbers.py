"""rimo_eval.artifacts.numbers: the one rounding, missing-value test and percentage format."""

from __future__ import annotations

import math

import numpy as np

from rimo_eval.artifacts.numbers import absent, pct, rounded
from rimo_eval.commands import summary
from rimo_eval.report import tables as T


def test_rounded_six_digits() -> None:
    assert rounded(1 / 3) == 0.333333 and rounded(None) is None
    assert rounded(np.float64(2 / 3)) == 0.666667


def test_absent_is_none_or_nan() -> None:
    assert absent(None) and absent(math.nan) and absent(np.nan)
    assert not absent(0) and not absent("") and not absent(0.0)


def test_pct_one_decimal_and_a_dash() -> None:
    assert pct(0.5714) == "57.1%" and pct(1) == "100.0%" and pct(np.int64(0)) == "0.0%"
    assert pct(None) == pct(math.nan) == pct(True) == pct("0.5") == "—"
    assert pct(None, dash="-") == "-"


def test_report_and_summary_format_alike() -> None:
    assert T.pct(0.25) == summary.pct(0.25) == "25.0%"
    assert (T.pct(None), summary.pct(None)) == ("—", "-")


def test_compare_and_the_leaderboard_print_a_p_value_alike() -> None:
    # 184 / 8192: the exact McNemar p that tests/e2e/test_compare.py reads as "0.02246" in
    # compare's Markdown; the leaderboard's vs-leader cell printed it "0.022" (issue 31 §6).
    from rimo_eval.commands.leaderboard.tables import vs_leader

    test = {"below_leader": True, "p_holm": 184 / 8192, "test": "exact McNemar"}
    assert vs_leader({"vs_leader": test}, 1000) == "0.02246 ▼"
    tiny = {**test, "p_holm": 1.234567e-9}
    assert vs_leader({"vs_leader": tiny}, 1000) == "1.235e-09 ▼"


def test_a_markdown_cell_escapes_only_what_markdown_reads_as_html() -> None:
    """compare prints its Markdown to the terminal: "<=1989" and "k > 1" as written, not
    "&lt;=1989" (issue 43 §6); a tag, an autolink or an entity stays inert when rendered."""
    from rimo_eval.render.markdown import md_cell

    assert md_cell("<=1989") == "<=1989" and md_cell("k > 1, 1 < k") == "k > 1, 1 < k"
    assert md_cell("AT&T") == "AT&T" and md_cell("a|b\nc") == "a\\|b c"
    assert md_cell("<script>x</script>") == "&lt;script>x&lt;/script>"
    assert md_cell("<https://x.invalid>") == "&lt;https://x.invalid>"
    assert md_cell("&amp; &#60;") == "&amp;amp; &amp;#60;"
