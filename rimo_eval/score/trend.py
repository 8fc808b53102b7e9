"""The year trend: logistic regression of correctness on competition year, per track.

Descriptive, never a primary metric (docs/accuracy_by_year.md). k-aware: each item
is one binomial observation, its right samples out of its k samples (k = 1: plain logistic
regression of the 0/1 outcome), in a GLM with logit link on the year; the slope is the change
in log-odds of a right answer per year. An item's k samples share its difficulty, so they are
not k independent trials: at k > 1 the covariance is scaled by the Pearson dispersion
(quasi-binomial), floored at 1 so the interval is never narrower than the binomial one. The
interval is Wald's at ``score.bootstrap.confidence``, the p-value that of the slope's z test.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.artifacts.numbers import rounded, significant
from rimo_eval.rimo.tracks import TRACK_P
from rimo_eval.rimo.years import year_of

CENTRE = 2000  # years are centred for a well-conditioned fit; the slope does not change
MODEL = ("binomial GLM, logit link: right samples of each item out of its k on year "
         "(quasi-binomial covariance at k > 1)")


def item_outcomes(scores: pd.DataFrame, track: str) -> pd.DataFrame:
    """Per item over every sample: year, right samples, samples (RIMO-P: gradable items,
    strict)."""
    rows = scores[scores["gradable"].astype(bool)] if track == TRACK_P else scores
    col = "strict" if track == TRACK_P else "correct"
    grouped = rows.assign(_right=rows[col].astype(bool).astype(int)).groupby(
        "problem_id", sort=True)["_right"].agg(["sum", "count"])
    return pd.DataFrame({"year": pd.array([year_of(p) for p in grouped.index], dtype="Int64"),
                         "right": grouped["sum"].to_numpy(dtype=int),
                         "samples": grouped["count"].to_numpy(dtype=int)},
                        index=grouped.index)


def _num(x: float) -> float:
    return rounded(x) + 0.0  # type: ignore[operator]  # -0.0 (a flat fit) is written as 0.0


def _empty(reason: str, n: int, k: int) -> dict[str, Any]:
    return {"model": MODEL, "n_items": n, "samples": k, "slope": None, "slope_ci_low": None,
            "slope_ci_high": None, "p_value": None, "dispersion": None, "reason": reason}


def fit(years: np.ndarray, right: np.ndarray, samples: np.ndarray, confidence: float
        ) -> dict[str, Any]:
    """The trend block; a fit with no finite estimate (no items, one year, every answer right
    or wrong, separation) has null numbers and a ``reason``."""
    n, k = len(years), int(samples.max()) if len(samples) else 0
    if n == 0:
        return _empty("no items", n, k)
    if len(set(years.tolist())) < 2:
        return _empty("one competition year only", n, k)
    total, hits = int(samples.sum()), int(right.sum())
    if hits in (0, total):
        return _empty("every answer right" if hits else "every answer wrong", n, k)
    # Here, after the cases with no fit: statsmodels (and the scipy.stats it imports) costs the
    # score stage a second or more, for nothing when there is nothing to fit (issue 43).
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_linear_model import GLM
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

    exog = np.column_stack([np.ones(n), years.astype(float) - CENTRE])
    endog = np.column_stack([right, samples - right]).astype(float)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PerfectSeparationWarning)
            warnings.simplefilter("error", ConvergenceWarning)
            model = GLM(endog, exog, family=Binomial())
            result = model.fit()
            dispersion = 1.0
            if k > 1:
                dispersion = max(1.0, float(result.pearson_chi2 / result.df_resid)
                                 if result.df_resid > 0 else 1.0)
                result = model.fit(scale=dispersion)
    except (PerfectSeparationWarning, ConvergenceWarning) as exc:
        return _empty(f"no finite estimate ({type(exc).__name__})", n, k)
    low, high = result.conf_int(alpha=1 - confidence)[1]
    return {"model": MODEL, "n_items": n, "samples": k, "slope": _num(result.params[1]),
            "slope_ci_low": _num(low), "slope_ci_high": _num(high),
            "p_value": significant(result.pvalues[1]), "dispersion": rounded(dispersion),
            "reason": None}


def year_trend(scores: pd.DataFrame, track: str, confidence: float) -> dict[str, Any]:
    per_item = item_outcomes(scores, track).dropna(subset=["year"])
    return fit(per_item["year"].to_numpy(dtype=int), per_item["right"].to_numpy(),
               per_item["samples"].to_numpy(), confidence)


__all__ = ["CENTRE", "MODEL", "fit", "item_outcomes", "year_trend"]
