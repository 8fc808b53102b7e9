"""What the team's git remote already holds: the experiments a sweep has pushed, by name.

DVC keeps an experiment at ``refs/exps/<rev[:2]>/<rev[2:]>/<name>`` (its baseline commit, then
its name), and ``dvc exp push`` sends that ref after the data (the task pushes the data
itself first), so a ref on the remote means a finished, complete experiment.
"""

from __future__ import annotations

import subprocess

from rimo_eval.errors import StageError


def exp_ref(rev: str, name: str) -> str:
    return f"refs/exps/{rev[:2]}/{rev[2:]}/{name}"


def ls_remote(git_url: str, *patterns: str, cwd: str | None = None) -> dict[str, str]:
    """ref -> sha on the remote; a remote that cannot be read is an error, never "empty"."""
    try:
        proc = subprocess.run(["git", "ls-remote", "--", git_url, *patterns], cwd=cwd,
                              capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StageError(f"git ls-remote {git_url}: {exc}") from exc
    if proc.returncode != 0:
        raise StageError(f"git ls-remote {git_url} failed: {proc.stderr.strip()[-500:]}")
    refs = {}
    for line in proc.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        refs[ref] = sha
    return refs


def pushed(git_url: str, rev: str, names: list[str], cwd: str | None = None
           ) -> dict[str, str]:
    """name -> commit of each of ``names`` already on the remote as an experiment of ``rev``."""
    refs = ls_remote(git_url, f"refs/exps/{rev[:2]}/{rev[2:]}/*", cwd=cwd)
    return {name: refs[exp_ref(rev, name)] for name in names if exp_ref(rev, name) in refs}
