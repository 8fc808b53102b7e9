"""The statistics of the project, one function each, in one place (as lm-eval's
``api/metrics.py``): every interval, test and resample draw that score, the judge, compare, the
leaderboard, the report and the view compute comes from here.

- ``proportions``: Wilson's interval of a proportion; Newcombe's interval of the difference of
  two independent proportions and Fisher's exact test (disjoint items of one run).
- ``bootstrap``: the seeded index draw, percentile intervals of ratios of per-item sums, the
  paired bootstrap p-value.
- ``means``: the interval of a mean of per-item fractions (Wilson's on the sum), which never
  collapses to a point.
- ``paired``: counting the concordant and discordant pairs, the exact McNemar, Holm.

A room like ``core/``: it imports ``core/`` only, so the judge may use it without reaching
score's code (CONTRIBUTING.md), and scipy only inside the function that needs it (start-up time,
tests/unit/test_lazy_imports.py).
"""

from rimo_eval.stats.bootstrap import (
    Interval,
    Ratio,
    bootstrap,
    bootstrap_p,
    bootstrap_params,
    draw,
)
from rimo_eval.stats.means import mean_interval
from rimo_eval.stats.paired import Concordance, concordance, holm, mcnemar_exact
from rimo_eval.stats.proportions import (
    fisher_p,
    newcombe,
    proportion,
    ratio,
    wilson,
    wilson_bounds,
)

__all__ = ["Concordance", "Interval", "Ratio", "bootstrap", "bootstrap_p", "bootstrap_params",
           "concordance", "draw", "fisher_p", "holm", "mcnemar_exact", "mean_interval", "newcombe",
           "proportion",
           "ratio", "wilson", "wilson_bounds"]
