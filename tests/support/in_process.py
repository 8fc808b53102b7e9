"""``rimo-eval`` through its real CLI entry, in the test's own interpreter.

``rimo_eval.cli.main`` parses the arguments, loads the repo's params.yaml, runs the tool and
returns the exit status, exactly as the ``rimo-eval`` command does; only the new interpreter is
left out. A subprocess per audit or compare spends ~7 s of CPU importing DVC and pandas for
~0.5 s of work, and the audit suites run dozens of them. Each module keeps at least one call
of the installed command (``pipeline_repo.sh``), so the entry point itself stays tested.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

from rimo_eval.cli import main


def rimo_eval(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``rimo-eval ARGS`` run in ``repo``: its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(repo), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["rimo-eval", *args], code, out.getvalue(),
                                       err.getvalue())


def audit_cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``rimo-eval audit ARGS`` run in ``repo``."""
    return rimo_eval(repo, "audit", *args)
