"""``rimo-eval sweep``'s arguments (rimo_eval.commands.arguments says why a module of its own)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    submit = actions.add_parser("submit", help="write the sbatch script and submit the tasks "
                                "not on the git remote yet")
    submit.add_argument("file", type=Path, metavar="SWEEP", help="the sweep file (YAML)")
    submit.add_argument("--dry-run", action="store_true",
                        help="print the script and what would be submitted; write nothing")
    status = actions.add_parser("status", help="each task's record, what the remote holds, "
                                "and the commands that collect the results")
    status.add_argument("file", type=Path, metavar="SWEEP", help="the sweep file (YAML)")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    task = actions.add_parser("task", help="run one array task (what the sbatch script runs)")
    task.add_argument("plan", type=Path, metavar="PLAN", help="the plan.json of a submission")
    task.add_argument("index", type=int, metavar="INDEX", help="the array task id")


__all__ = ["add_arguments"]
