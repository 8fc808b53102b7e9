"""The stage and tool modules import no heavy statistics library at start-up: scipy.stats took
1 s (3-5 s on a loaded 2-core machine) in every score, judge, audit, compare, view and
leaderboard process, for Fisher's test that only a training cutoff needs. Each is imported
where it is used."""

from __future__ import annotations

import json
import subprocess
import sys

MODULES = ("stages.cli", "stages.score.stage", "stages.judge.stage",
           "stages.commands.audit.command", "stages.commands.compare.command",
           "stages.commands.view.command", "stages.commands.leaderboard.command")
HEAVY = ("scipy.stats", "statsmodels")


def test_no_stage_or_tool_imports_scipy_stats_or_statsmodels_at_start_up() -> None:
    code = (f"import sys\nfor m in {MODULES!r}: __import__(m)\n"
            f"print(__import__('json').dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == []
