"""The stage and tool modules import no heavy library they may not use at start-up: scipy.stats
took 1 s of CPU (3-5 s on a loaded 2-core machine) in every score, judge, audit, compare, view
and leaderboard process, for Fisher's test that only a training cutoff needs; matplotlib most
of a second in every compare, for the chart of the HTML page alone. Each is imported where it is
used (score's year trend and the audit's recomputation still import scipy.stats through
statsmodels when they run, as they must)."""

from __future__ import annotations

import json
import subprocess
import sys

MODULES = ("rimo_eval.cli", "rimo_eval.score.stage", "rimo_eval.judge.stage",
           "rimo_eval.commands.audit.command", "rimo_eval.commands.compare.command",
           "rimo_eval.commands.view.command", "rimo_eval.commands.leaderboard.command")
HEAVY = ("scipy.stats", "statsmodels")


def imported(modules: tuple[str, ...], heavy: tuple[str, ...]) -> list[str]:
    """Which of ``heavy`` a fresh interpreter holds after importing ``modules``."""
    code = (f"import sys\nfor m in {modules!r}: __import__(m)\n"
            f"print(__import__('json').dumps([m for m in {heavy!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def test_no_stage_or_tool_imports_scipy_stats_or_statsmodels_at_start_up() -> None:
    assert imported(MODULES, HEAVY) == []


def test_compare_imports_matplotlib_only_to_draw_the_page() -> None:
    assert imported(("rimo_eval.commands.compare.command",), ("matplotlib",)) == []
