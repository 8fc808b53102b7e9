"""One timed child process for the benchmarks: its wall clock, peak RSS and output."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Timed:
    wall_s: float
    rss_mib: float  # peak, from wait4: the child's own, not the benchmark's
    returncode: int
    output: str
    cpu_s: float = 0.0  # user + system CPU of the child (and the children it waited for)


def run_timed(command: list[str], cwd: Path, env: dict[str, str], *,
              stderr_only: bool = False) -> Timed:
    """Run ``command`` to its end; ``output`` is stdout and stderr together, or stderr alone
    (the child's stdout then goes to the benchmark's)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, text=True, stderr=subprocess.PIPE
                            if stderr_only else subprocess.STDOUT,
                            stdout=None if stderr_only else subprocess.PIPE)
    stream = proc.stderr if stderr_only else proc.stdout
    assert stream is not None
    output = stream.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Timed(wall, usage.ru_maxrss / 1024, proc.returncode, output,
                 usage.ru_utime + usage.ru_stime)
