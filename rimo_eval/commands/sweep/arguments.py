"""``rimo-eval sweep``'s arguments (rimo_eval.commands.arguments says why a module of its own)."""

from __future__ import annotations

import argparse
from pathlib import Path

SUBMIT_DESCRIPTION = """\
Write the sbatch script of a sweep file and submit one Slurm array task per
model not on the git remote yet: each task starts the model's server, runs
`dvc exp run --temp -n NAME -S ...` in its own clone and pushes the experiment.

The sweep file (YAML):
  git_remote, dvc_remote  where each task pushes its experiment and its data
  results                 records, logs, script and plan (on a shared disk)
  workdir                 node-local: each task's clone and response cache
  targets                 `dvc exp run` targets (empty: the whole pipeline)
  params                  -S overrides for every model (YAML: null, 0.6, "07")
  server                  command, args, port, ready_timeout_s (default: vLLM)
  slurm                   job_name, max_parallel, options (sbatch flags)
  setup                   shell lines before each task (module load ...)
  models                  each: name, path, served_name, params, server_args

The full format, an example and how to collect the results: docs/sweeps.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    submit = actions.add_parser(
        "submit", help="write the sbatch script and submit the tasks not on the git remote yet",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=SUBMIT_DESCRIPTION)
    submit.add_argument("file", type=Path, metavar="SWEEP",
                        help="the sweep file (YAML; the keys above, docs/sweeps.md)")
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
