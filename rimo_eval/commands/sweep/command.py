"""``rimo-eval sweep submit|status|task``: a model sweep as a Slurm job array.

``submit SWEEP.yaml`` resolves the sweep file against this repo (its commit, the git remote),
writes ``RESULTS/plan.json`` and ``RESULTS/sweep.sbatch`` and runs ``sbatch`` on the tasks
whose experiment is not on the git remote yet (``--dry-run``: print the script, write and
submit nothing). ``status`` reads the tasks' records and the remote and prints the commands
that collect the results. ``task`` is what each array task runs (rimo_eval/commands/sweep/task).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rimo_eval.commands.sweep.plan import Plan, read_sweep, resolve
from rimo_eval.commands.sweep.remote import ls_remote, pushed
from rimo_eval.commands.sweep.script import array_spec, plan_path, render, script_path
from rimo_eval.commands.sweep.task import read_record, run_task
from rimo_eval.commands.sweep.values import check_git_remote
from rimo_eval.errors import ConfigError, StageError
from rimo_eval.io.atomic import write_text
from rimo_eval.io.git import git, head_commit
from rimo_eval.io.terminal import for_terminal, json_for_terminal

if TYPE_CHECKING:
    from rimo_eval.params.config import Params


def repo_root() -> Path:
    top = git(Path.cwd(), "rev-parse", "--show-toplevel")
    if not top:
        raise ConfigError(f"{Path.cwd()} is in no git repository: run it inside the "
                          f"project's clone")
    return Path(top.strip())


def git_url(root: Path, remote: str) -> str:
    """A remote's name gives its URL; a URL or a path is taken as it is. ``remote`` has passed
    values.check_git_remote: no option reaches git."""
    if "/" in remote or ":" in remote:
        return remote
    url = git(root, "remote", "get-url", "--", remote)
    if not url:
        raise ConfigError(f"git_remote: {remote!r} is not a remote of {root} (git remote -v); "
                          f"name one, or give its URL")
    return url.strip()


def check_rev_on_remote(root: Path, url: str, rev: str) -> None:
    """Every task clones the remote at ``rev``: it must be on one of its branches."""
    heads = ls_remote(url, "refs/heads/*", cwd=str(root))
    for sha in heads.values():
        if sha == rev or git(root, "merge-base", "--is-ancestor", rev, sha) is not None:
            return
    raise ConfigError(f"commit {rev[:12]} is on no branch of {url}: `git push` it first "
                      f"(every task clones the remote at this commit)")


def load_plan(file: Path) -> Plan:
    root = repo_root()
    sweep = read_sweep(file)
    rev = head_commit(root)
    if rev is None:
        raise ConfigError(f"{root}: no commit yet; commit the project first")
    remote = sweep.data.get("git_remote") or "origin"
    if not isinstance(remote, str):
        raise ConfigError(f"{file}: git_remote: a remote's name or a git URL")
    check_git_remote(f"{file}: git_remote", remote)  # before any git command sees it
    # The -S values are tried on the params.yaml each task's clone will have.
    params_text = git(root, "show", f"{rev}:params.yaml")
    return resolve(sweep, repo=root, rev=rev, git_url=git_url(root, remote),
                   python=sys.executable, params_text=params_text)


def submit(file: Path, dry_run: bool) -> int:
    plan = load_plan(file)
    root = Path(plan.repo)
    if git(root, "status", "--porcelain", "--untracked-files=no"):
        print(for_terminal(f"rimo-eval sweep: warning: uncommitted changes in {root} are not "
                           f"part of the sweep (each task runs commit {plan.rev[:12]} of the "
                           "remote)"), file=sys.stderr)
    check_rev_on_remote(root, plan.git_url, plan.rev)
    done = pushed(plan.git_url, plan.rev, [t.name for t in plan.tasks], cwd=str(root))
    pending = [t.index for t in plan.tasks if t.name not in done]
    for name in done:
        print(for_terminal(f"rimo-eval sweep: {name}: already on {plan.git_url}, not submitted"),
              file=sys.stderr)
    script = render(plan)
    if dry_run:
        print(for_terminal(script), end="")
        what = (f"--array={array_spec(pending, plan.max_parallel)}" if pending else "nothing")
        print(for_terminal(f"rimo-eval sweep: dry run: would write {script_path(plan)} and "
              f"{plan_path(plan)}, then submit {what}"), file=sys.stderr)
        return 0
    (Path(plan.results) / "logs").mkdir(parents=True, exist_ok=True)
    write_text(plan_path(plan), plan.to_json())
    write_text(script_path(plan), script)
    if not pending:
        print(for_terminal(f"every experiment of {file} is already on {plan.git_url}: "
                           "nothing submitted"))
        return 0
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise StageError(f"sbatch not found: {script_path(plan)} is written; submit it on a "
                         f"machine with Slurm (sbatch --array={array_spec(pending, None)} ...)")
    proc = subprocess.run([sbatch, "--parsable",
                           f"--array={array_spec(pending, plan.max_parallel)}",
                           str(script_path(plan))], cwd=root, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise StageError(f"sbatch {script_path(plan)} failed: {proc.stderr.strip()[-1000:]}")
    job = proc.stdout.strip().split(";")[0]
    names = ", ".join(plan.tasks[i].name for i in pending)
    print(for_terminal(f"submitted job {job}: {len(pending)} task(s) ({names}); records in "
                       f"{plan.results}"))
    return 0


def status(file: Path, as_json: bool) -> int:
    sweep_plan = load_plan(file)
    saved = plan_path(sweep_plan)
    plan = Plan.from_file(saved) if saved.exists() else sweep_plan
    names = [t.name for t in plan.tasks]
    done = pushed(plan.git_url, plan.rev, names, cwd=plan.repo)
    rows = []
    for name in names:
        record = read_record(plan, name) or {"status": "not run", "step": None, "reason": None}
        rows.append({"name": name, "on_remote": name in done, **{
            k: record.get(k) for k in ("status", "step", "job", "node", "reason")}})
    collect = [shlex.join(["dvc", "exp", "pull", plan.git_url, *(n for n in names if n in done)]),
               "rimo-eval leaderboard --all"] if done else []
    if as_json:
        print(json_for_terminal(json.dumps({"rev": plan.rev, "tasks": rows,
                                            "collect": collect}, indent=1)))
    else:
        width = max(len(n) for n in names)
        for row in rows:
            where = "on the remote" if row["on_remote"] else "not on the remote"
            line = f"{row['name']:<{width}}  {row['status']:<8} {where}"
            if row["reason"] and row["status"] != "skipped":
                line += f": {row['reason']}"
            print(for_terminal(line))
        if collect:
            print(for_terminal("\ncollect the results:\n  " + "\n  ".join(collect)))
    return 0 if len(done) == len(names) else 1


def main(args: argparse.Namespace, params: Params | None) -> int:
    if args.action == "submit":
        return submit(args.file, args.dry_run)
    if args.action == "status":
        return status(args.file, args.json)
    return run_task(Plan.from_file(args.plan), args.index)
