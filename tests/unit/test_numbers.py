"""rimo_eval.core.numbers: the one rounding, missing-value test and percentage format."""

from __future__ import annotations

import math

import numpy as np

from rimo_eval.commands import summary
from rimo_eval.core.numbers import absent, pct, rounded
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
