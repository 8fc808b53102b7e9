"""One array task of a sweep, on its node: serve the model, run the experiment, bring it home.

Steps, each named in the task's record (``RESULTS/NAME.json``, written atomically at every
step) so that a task that fails or is killed says where and why:

1. ``check``: the experiment already on the git remote (by name, under the plan's commit) is
   skipped: a re-submitted array reruns only what is missing.
2. ``server``: start the recipe's command (vLLM, or what stands in for it) in its own process
   group, log to ``RESULTS/logs/NAME.server.log``; wait until ``GET /v1/models`` answers 200,
   until ``server.ready_timeout_s`` (then: failed, "not ready after N s"), or until the server
   exits (failed, with the end of its log).
3. ``clone``: a fresh clone of the git remote at the plan's commit under the node-local
   workdir; ``dvc pull`` brings the baseline's outputs so that only what the overrides change
   reruns.
4. ``run``: ``dvc exp run --temp -n NAME [targets] -S ...``.
5. ``push``: the data first (the experiment's commit checked out in the throwaway clone,
   ``dvc push``, of the targets and what they depend on when the sweep names targets), then the
   experiment's ref (``dvc exp push --no-cache``). ``dvc exp push`` alone sends the ref before
   the data, so a failure between the two would leave a ref whose files are missing: a
   half-pushed experiment. In this order a ref on the remote always has its data, and an
   interrupted push leaves only unreferenced files in the bucket (content-addressed: the retry
   reuses them).
6. ``verify``: the remote has the ref; record ``pushed`` with its commit.

SIGTERM (``scancel``, the time limit, preemption) stops the running step, the server and the
commands, and records ``failed`` with the step; nothing after it is pushed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from rimo_eval.commands.sweep.plan import Plan, Task
from rimo_eval.commands.sweep.remote import exp_ref, pushed
from rimo_eval.errors import StageError
from rimo_eval.io.atomic import write_json
from rimo_eval.io.terminal import for_terminal

TAIL_CHARS = 1500  # of a failed command's output, in the record


class Cancelled(Exception):
    """The job was sent SIGTERM (scancel, time limit, preemption)."""


class TaskFailed(Exception):
    pass


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_path(plan: Plan, name: str) -> Path:
    return Path(plan.results) / f"{name}.json"


def read_record(plan: Plan, name: str) -> dict[str, Any] | None:
    import json

    try:
        loaded = json.loads(record_path(plan, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


class Run:
    """The task's record and the processes it started (all stopped on the way out)."""

    def __init__(self, plan: Plan, task: Task) -> None:
        self.plan, self.task = plan, task
        job = os.environ.get("SLURM_ARRAY_JOB_ID") or os.environ.get("SLURM_JOB_ID") or "local"
        self.record: dict[str, Any] = {
            "name": task.name, "index": task.index, "status": "running", "step": "check",
            "job": f"{job}_{task.index}", "node": socket.gethostname(), "started": now(),
            "rev": plan.rev, "git_remote": plan.git_url, "reason": None,
            "log": str(self.log_path), "server_log": str(self.server_log_path)}
        self.children: list[subprocess.Popen[bytes]] = []

    @property
    def log_path(self) -> Path:
        return Path(self.plan.results) / "logs" / f"{self.task.name}.log"

    @property
    def server_log_path(self) -> Path:
        return Path(self.plan.results) / "logs" / f"{self.task.name}.server.log"

    def save(self, **changes: Any) -> None:
        self.record.update(changes)
        write_json(record_path(self.plan, self.task.name), self.record)

    def step(self, name: str) -> None:
        self.save(step=name)
        self.say(f"step {name}")

    def say(self, text: str) -> None:
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(f"{now()} [{self.task.name}] {text}\n")

    def start(self, argv: list[str], log: TextIO, cwd: str | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        # Its own process group: stopping the task stops the command and all it started.
        proc = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env=None if env is None else {**os.environ, **env})
        self.children.append(proc)
        return proc

    def command(self, argv: list[str], cwd: str, what: str) -> None:
        """Run ``argv`` to its end, its output appended to the task's log; failed: raise."""
        self.say("$ " + " ".join(argv))
        with self.log_path.open("a", encoding="utf-8") as log:
            start = log.tell()
            proc = self.start(argv, log, cwd)
            code = proc.wait()
        if code != 0:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")[start:]
            raise TaskFailed(f"{what} failed (exit {code}): ...{text[-TAIL_CHARS:]}")

    def stop_children(self) -> None:
        for proc in reversed(self.children):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.children:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def wait_ready(run: Run, server: subprocess.Popen[bytes], port: int, timeout_s: float) -> float:
    """Seconds until ``GET /v1/models`` answered 200; TaskFailed when the server exits first
    or the deadline passes."""
    url = f"http://127.0.0.1:{port}/v1/models"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy
    started = time.monotonic()
    while True:
        code = server.poll()
        if code is not None:
            raise TaskFailed(f"the model server exited ({code}) before it was ready; the end of "
                             f"{run.server_log_path}: ...{_tail(run.server_log_path)}")
        try:
            with opener.open(url, timeout=5) as resp:
                if resp.status == 200:
                    return time.monotonic() - started
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or loading (vLLM answers once the weights are in)
        waited = time.monotonic() - started
        if waited > timeout_s:
            raise TaskFailed(f"the model server was not ready after {timeout_s:g} s "
                             f"(server.ready_timeout_s): GET {url} never answered 200; the end "
                             f"of {run.server_log_path}: ...{_tail(run.server_log_path)}")
        time.sleep(min(2.0, 0.2 + waited / 10))


def _tail(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-TAIL_CHARS:]
    except OSError:
        return "(no log)"


def _cancel(signum: int, frame: FrameType | None) -> None:
    # Once: Slurm may signal again while the record is written, which must not be cut short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Cancelled(signal.Signals(signum).name)


def run_task(plan: Plan, index: int) -> int:
    """Run task ``index`` of ``plan``; 0 when its experiment is on the remote (now or before)."""
    task = plan.task(index)
    run = Run(plan, task)
    run.log_path.parent.mkdir(parents=True, exist_ok=True)
    clone = Path(plan.workdir) / "clones" / f"{task.name}-{run.record['job']}"
    signal.signal(signal.SIGTERM, _cancel)
    try:
        return _steps(run, clone)
    except Cancelled as exc:
        reason = (f"cancelled by {exc} (scancel, the time limit or preemption) during step "
                  f"{run.record['step']}; nothing of it was pushed")
    except (TaskFailed, StageError, OSError) as exc:
        reason = f"step {run.record['step']}: {exc}"
    finally:
        with contextlib.suppress(Cancelled):
            run.stop_children()
    with contextlib.suppress(OSError):
        run.say(f"failed: {reason}")
    run.save(status="failed", finished=now(), reason=reason,
             clone=str(clone) if clone.exists() else None)
    print(for_terminal(f"rimo-eval sweep: {task.name}: {reason}"), file=sys.stderr)
    return 1


def _steps(run: Run, clone: Path) -> int:
    plan, task = run.plan, run.task
    run.save()
    done = pushed(plan.git_url, plan.rev, [task.name], cwd=plan.repo)
    if task.name in done:
        run.save(status="skipped", finished=now(), commit=done[task.name],
                 reason=f"already on {plan.git_url} as {exp_ref(plan.rev, task.name)}: "
                        f"not run again")
        run.say("already pushed: skipped")
        return 0
    run.step("server")
    with run.server_log_path.open("a", encoding="utf-8") as log:
        log.write(f"{now()} $ {' '.join(task.server)}\n")
        log.flush()
        server = run.start(task.server, log, env=task.server_env)
    run.save(ready_s=round(wait_ready(run, server, task.port, plan.ready_timeout_s), 1))
    run.step("clone")
    shutil.rmtree(clone, ignore_errors=True)
    clone.parent.mkdir(parents=True, exist_ok=True)
    # After `--`: the URL and the folder are never read as options (plan.py checks them too).
    run.command(["git", "clone", "-q", "--no-checkout", "--", plan.git_url, str(clone)],
                plan.repo, "git clone")
    run.command(["git", "checkout", "-q", "--detach", plan.rev], str(clone),
                f"git checkout {plan.rev[:12]}")
    remote = [f"--remote={plan.dvc_remote}"] if plan.dvc_remote else []
    # What the remote lacks is rebuilt by the run itself: a partial pull is no failure. With
    # targets, only what they depend on (not the report's and the view's files).
    scope = ["--with-deps", "--", *plan.targets] if plan.targets else []
    with contextlib.suppress(TaskFailed):
        run.command(["dvc", "pull", "-q", "--allow-missing", *remote, *scope], str(clone),
                    "dvc pull")
    run.step("run")
    sets = [arg for override in task.overrides for arg in ("-S", override)]
    run.command(["dvc", "exp", "run", "--temp", "-n", task.name, *sets, "--", *plan.targets],
                str(clone), "dvc exp run")
    run.step("push")
    # The experiment's commit in the throwaway clone: `dvc push` sends the outputs its
    # dvc.lock names, from the clone's cache (the run's own and what the pull brought).
    run.command(["git", "checkout", "-q", "--detach", exp_ref(plan.rev, task.name)],
                str(clone), "git checkout of the experiment")
    run.command(["dvc", "push", *remote, *scope], str(clone), "dvc push (the data)")
    run.command(["dvc", "exp", "push", "--no-cache", "--", plan.git_url, task.name], str(clone),
                "dvc exp push (the ref)")
    run.step("verify")
    done = pushed(plan.git_url, plan.rev, [task.name], cwd=plan.repo)
    if task.name not in done:
        raise TaskFailed(f"dvc exp push succeeded but {exp_ref(plan.rev, task.name)} is not "
                         f"on {plan.git_url}")
    run.save(status="pushed", finished=now(), commit=done[task.name], reason=None)
    run.say(f"pushed {exp_ref(plan.rev, task.name)} at {done[task.name][:12]}")
    shutil.rmtree(clone, ignore_errors=True)
    return 0
