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
from pathlib import Path

from tests.support.paths import REPO_ROOT

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


def test_a_stage_builds_no_tools_arguments_and_a_disabled_judge_no_chat(tmp_path: Path) -> None:
    """Issue 43 §Performance: every stage process built every tool's arguments, and `cache`'s
    pull in the cache engine (tqdm, the repair module); the judge, disabled by default, imported
    its chat transport (aiohttp). What a stage does not use, it no longer imports."""
    code = ("import sys\nfrom rimo_eval.cli import build_parser\n"
            "from rimo_eval.cli import STAGES\n"
            "for stage in STAGES:\n    build_parser([stage, '--params', 'params.yaml'])\n"
            "from rimo_eval.params.config import load_params\n"
            "from rimo_eval.judge.stage import judge\n"
            f"judge(load_params({str(REPO_ROOT / 'params.yaml')!r}), "
            f"table_path=__import__('pathlib').Path("
            f"{str(tmp_path / 'j.parquet')!r}), metrics_path=__import__('pathlib').Path("
            f"{str(tmp_path / 'j.json')!r}))\n"
            "from rimo_eval.cli import ARGUMENTS\n"
            "print(__import__('json').dumps(sorted(m for m in ('rimo_eval.commands.cache', "
            "'rimo_eval.chat.cache_repair', 'tqdm', 'aiohttp', 'rimo_eval.judge.chat', "
            "'rimo_eval.commands.sweep.command', *ARGUMENTS.values()) if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == []
    assert (tmp_path / "j.json").is_file()


def test_the_report_stage_leaves_pandas_and_matplotlib_to_its_kernel() -> None:
    """The notebook's kernel imports the report helpers; the stage's process, which only runs
    papermill and nbconvert, imported them too (issue 43)."""
    assert imported(("rimo_eval.cli", "rimo_eval.report.stage"), ("pandas", "matplotlib")) == []


def test_a_year_trend_with_nothing_to_fit_imports_no_statsmodels() -> None:
    """A small experiment whose answers are all wrong (or all right) has no trend to fit; its
    score stage imported statsmodels and scipy.stats anyway, 1.4 s of its CPU (issue 43)."""
    code = ("import sys, numpy as np\nfrom rimo_eval.score.trend import fit\n"
            "block = fit(np.array([2001, 2005]), np.array([0, 0]), np.array([1, 1]), 0.95)\n"
            "print(__import__('json').dumps([block['reason'], 'statsmodels' in sys.modules, "
            "'scipy.stats' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == ["every answer wrong", False, False]
