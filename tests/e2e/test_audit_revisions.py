"""`rimo-eval audit NAME`: a git revision or a DVC experiment is audited as the workspace is,
through the real CLI in a throwaway repo; and the headline counts metrics.json's own values."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from rimo_eval.artifacts.flat_keys import flatten
from tests.support.in_process import audit_cli
from tests.support.pipeline_repo import sh
from tests.support.validated_repo import validated_copy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, validated_base: Path) -> Path:
    """A committed oracle sample (limit 5) and an experiment on it (limit 3)."""
    repo = validated_copy(validated_base, tmp_path_factory.mktemp("audit-rev") / "repo",
                          predict={"backend": "oracle", "limit": 5})
    sh(repo, "dvc", "repro", "score")
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", "oracle sample of 5")
    sh(repo, "dvc", "exp", "run", "-n", "lim3", "score", "-S", "predict.limit=3")
    return repo


def audit(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``rimo-eval audit ARGS``, its CLI entry in-process (tests.support.in_process); one test
    runs the installed command."""
    return audit_cli(repo, *args)


def test_headline_counts_only_the_metrics_file(repo: Path) -> None:
    proc = audit(repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    metrics = json.loads((repo / "reports/metrics.json").read_text(encoding="utf-8"))
    own = len(flatten({k: v for k, v in metrics.items() if k != "provenance"}))
    breakdown = len(flatten(json.loads((repo / "reports/breakdown.json").read_text())))
    head = proc.stdout.splitlines()[0]
    assert head.startswith(f"audit: OK: {own} metrics in reports/metrics.json and "
                           f"{breakdown} breakdown values in reports/breakdown.json recompute")


def test_audits_an_experiment_by_name(repo: Path) -> None:
    workspace_metrics = (repo / "reports/metrics.json").read_bytes()
    proc = sh(repo, "rimo-eval", "audit", "lim3", "--json", check=False)  # the command itself
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and report["breaks"] == []
    n = next(m for m in report["metrics"] if m["name"] == "RIMO-N.n")
    assert n["value"] == 3  # the experiment's run, not the workspace's 5
    assert "experiment lim3" in proc.stderr
    # The workspace and the repo's worktree list are left as they were.
    assert (repo / "reports/metrics.json").read_bytes() == workspace_metrics
    assert len(sh(repo, "git", "worktree", "list").stdout.splitlines()) == 1


def test_audits_a_git_revision(repo: Path) -> None:
    proc = audit(repo, "HEAD")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("audit: OK: ")
    assert "RIMO-N.accuracy = 1.0  [ok]" in proc.stdout
    assert "git HEAD at" in proc.stderr


def test_an_unknown_name_is_a_clear_error(repo: Path) -> None:
    proc = audit(repo, "no-such-run")
    assert proc.returncode == 1
    assert "no-such-run: not a git revision, branch or DVC experiment" in proc.stderr


def test_outputs_missing_from_the_cache_are_named_with_what_brings_them_back(repo: Path) -> None:
    """An experiment whose scores are not in this clone's cache (as after `git fetch` of its
    ref without `dvc exp pull`): named, with the command, and nothing is left behind."""
    sh(repo, "dvc", "exp", "run", "-n", "lim2", "score", "-S", "predict.limit=2")
    ref = sh(repo, "git", "for-each-ref", "--format=%(refname)", "refs/exps").stdout.split()
    lim2 = next(r for r in ref if r.endswith("/lim2"))
    lock = yaml.safe_load(sh(repo, "git", "show", f"{lim2}:dvc.lock").stdout)
    md5 = next(o["md5"] for o in lock["stages"]["score"]["outs"]
               if o["path"] == "data/scores/rimo_n.parquet")
    (repo / ".dvc/cache/files/md5" / md5[:2] / md5[2:]).unlink()
    proc = audit(repo, "lim2")
    assert proc.returncode == 1
    # No DVC remote here: the advice is what works in this clone, not `dvc exp pull`.
    assert "data/scores/rimo_n.parquet" in proc.stderr and "pull" not in proc.stderr
    assert "rerun lim2 here (`dvc exp run`)" in proc.stderr
    assert len(sh(repo, "git", "worktree", "list").stdout.splitlines()) == 1
