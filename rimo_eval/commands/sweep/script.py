"""The sbatch script of a sweep: a job array, one task per model, each running
``rimo-eval sweep task`` on the plan written beside it.

The script holds no secret and needs none: sbatch gives the job the environment of the shell
that submitted it (``--export=ALL``, its default), where the API keys and the S3 credentials
are; a node reads them from there, as `dvc` and the predictor do on a laptop.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from rimo_eval.commands.sweep.plan import Plan
from rimo_eval.commands.sweep.values import comment


def plan_path(plan: Plan) -> Path:
    return Path(plan.results) / "plan.json"


def script_path(plan: Plan) -> Path:
    return Path(plan.results) / "sweep.sbatch"


def array_spec(indices: list[int], max_parallel: int | None) -> str:
    """``0-2`` for a whole sweep, ``1,4`` for what a re-submission still has to run."""
    ordered = sorted(indices)
    spec = (f"{ordered[0]}-{ordered[-1]}"
            if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 1
            else ",".join(map(str, ordered)))
    return spec + (f"%{max_parallel}" if max_parallel else "")


def render(plan: Plan) -> str:
    """The script. Slurm reads ``#SBATCH`` lines only up to the first command, so they come
    right after the shebang; every value in a comment is escaped (values.comment), every value
    in a command is quoted: a sweep value never becomes a line of its own."""
    q = shlex.quote
    width = max(len(t.name) for t in plan.tasks)
    pad = " " * (width + 10)
    listing = [line for t in plan.tasks for line in (
        comment(f"#   {t.index:>3}  {t.name:<{width}}  -S " + " -S ".join(t.overrides[2:])),
        comment(f"#{pad}server: {shlex.join(t.server)}"))]
    runner = ("rimo-eval" if plan.setup else f"{q(plan.python)} -m rimo_eval")
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={plan.job_name}",
        f"#SBATCH --array={array_spec([t.index for t in plan.tasks], plan.max_parallel)}",
        f"#SBATCH --output={Path(plan.results) / 'logs' / '%A_%a.out'}",
        *(f"#SBATCH {option}" for option in plan.slurm_options),
        comment(f"# A model sweep as a Slurm job array, written by `rimo-eval sweep submit "
                f"{plan.sweep_file}`"),
        f"# (sweep file sha256 {plan.sweep_sha256[:16]}), every experiment based on commit "
        f"{plan.rev[:12]}.",
        "# Task i starts model i's server on its node, waits for GET /v1/models, runs",
        "# `dvc exp run --temp -n NAME -S ...` in its own clone of the git remote, pushes the data",
        "# to the DVC remote and then the experiment, and writes RESULTS/NAME.json (pushed,",
        "# skipped or failed, with the reason). Every task also sets predict.backend=openai and",
        "# predict.openai.base_url to its server. The tasks, from plan.json beside this script:",
        *listing,
        "# No secret here: the job inherits the environment of the shell that ran sbatch.",
        "set -euo pipefail",
        f"cd {q(plan.repo)}",
        *plan.setup,
        f'exec {runner} sweep task {q(str(plan_path(plan)))} "$SLURM_ARRAY_TASK_ID"',
    ]
    return "\n".join(lines) + "\n"
