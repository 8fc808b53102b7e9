"""A team remote on a real S3 server (SeaweedFS on 127.0.0.1): push in one clone, pull in another.

Clone A runs a baseline and two replay experiments, then ``dvc push`` and ``dvc exp push`` to
the S3 remote and to a bare git repo on disk. A fresh clone B, with an empty DVC cache, first
gets a clear "missing, `dvc pull` brings it" from audit and compare (no traceback), then
``dvc pull`` / ``dvc exp pull``: byte-identical artifacts, the same ``rimo-eval compare``
result as in A, and a passing audit. A's credentials come from the environment, B's from
``.dvc/config.local``; neither appears in any committed file or git object.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.in_process import rimo_eval
from tests.support.key_forms import key_forms
from tests.support.pipeline_repo import copy_repo, env
from tests.support.replay_files import replay_rows, repo_gold, write_jsonl
from tests.support.s3_server import S3Server

pytestmark = pytest.mark.slow

EXPS = ("exp-y", "exp-z")
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


def run(cwd: Path, *args: str, extra: dict[str, str] | None = None, check: bool = True,
        ) -> subprocess.CompletedProcess[str]:
    """A command with no AWS credentials in its environment except those in ``extra``."""
    e = {k: v for k, v in env().items() if k not in AWS_VARS}
    e.update(extra or {})
    proc = subprocess.run(args, cwd=cwd, env=e, capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def tool(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``rimo-eval ARGS`` through its CLI entry in-process (tests.support.in_process): audit and
    compare read the workspace and the local DVC cache, never the remote. The first audit and
    compare of each clone run the installed command."""
    proc = rimo_eval(cwd, *args)
    if check and proc.returncode != 0:
        raise AssertionError(f"rimo-eval {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def cached_outputs(repo: Path) -> dict[str, str]:
    """sha256 of every file of every DVC-cached output, plus the git-tracked metrics files."""
    files = [p for d in ("data/raw", "data/items", "data/predictions", "data/scores")
             for p in sorted((repo / d).rglob("*")) if p.is_file()]
    files += [repo / "reports" / name for name in ("metrics.json", "breakdown.json",
                                                   "provenance.json", "report.html")]
    return {p.relative_to(repo).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in files}


def make_replays(repo: Path) -> None:
    """Two replays that differ from the gold answers (and each other) in known items."""
    gold_n, gold_p = repo_gold(repo)
    ids_n, ids_p = sorted(gold_n), sorted(gold_p)
    write_jsonl(repo / "replay_y.jsonl", replay_rows(
        gold_n, gold_p, wrong_n=set(ids_n[:6]), missing_n=set(), wrong_p=set(ids_p[:2])))
    write_jsonl(repo / "replay_z.jsonl", replay_rows(
        gold_n, gold_p, wrong_n=set(ids_n[3:12]), missing_n={ids_n[20]}, wrong_p=set()))


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, oracle_run: Path, s3: S3Server
         ) -> dict[str, Any]:
    """Runs the whole A -> remote -> B flow once; the tests check what each step produced."""
    top = tmp_path_factory.mktemp("team")
    origin = top / "origin.git"
    run(top, "git", "init", "-q", "--bare", "-b", "main", str(origin))
    a = copy_repo(oracle_run, top / "a")  # baseline: the oracle backend over every item
    creds = s3.env()

    make_replays(a)
    run(a, "dvc", "repro")  # nothing to rerun in the copy
    run(a, "dvc", "remote", "add", "-d", "team", f"s3://{s3.bucket}/rimo")
    run(a, "dvc", "remote", "modify", "team", "endpointurl", s3.endpoint_url)
    run(a, "git", "add", "-A")
    run(a, "git", "commit", "-qm", "baseline and a team remote")
    run(a, "git", "remote", "add", "origin", str(origin))
    run(a, "git", "push", "-q", "origin", "main")
    shas_a = {"main": cached_outputs(a)}
    for name in EXPS:
        # Up to score: what audit and compare read (the judge, view and report stages only
        # read the metrics; main's report and its push/pull are checked as they are).
        run(a, "dvc", "exp", "run", "-n", name, "score", "-S", "predict.backend=replay",
            "-S", f"predict.replay.path=replay_{name[-1]}.jsonl")
        shas_a[name] = cached_outputs(a)
    run(a, "git", "checkout", "-q", "--", ".")  # leave A's workspace at its commit again
    run(a, "dvc", "checkout", "-q")
    pushed = run(a, "dvc", "push", extra=creds)
    exp_pushed = run(a, "dvc", "exp", "push", "origin", *EXPS, extra=creds)
    compare_a = run(a, "rimo-eval", "compare", *EXPS, "--json").stdout

    b = top / "b"
    run(top, "git", "clone", "-q", str(origin), str(b))
    steps: dict[str, Any] = {"empty_cache": not (b / ".dvc/cache").exists()}
    # B keeps its credentials in the git-ignored .dvc/config.local, not in the environment.
    run(b, "dvc", "remote", "modify", "--local", "team", "access_key_id", s3.access_key)
    run(b, "dvc", "remote", "modify", "--local", "team", "secret_access_key", s3.secret_key)
    steps["audit_before"] = run(b, "rimo-eval", "audit", check=False)
    steps["compare_before"] = run(b, "rimo-eval", "compare", "main", "workspace", check=False)
    run(b, "dvc", "exp", "pull", "--no-cache", "origin", *EXPS)  # the refs, not the data
    steps["compare_exps_before"] = tool(b, "compare", *EXPS, check=False)
    steps["pull"] = run(b, "dvc", "pull")
    steps["shas_main"] = cached_outputs(b)
    steps["audit_main"] = tool(b, "audit", check=False)
    steps["exp_pull"] = run(b, "dvc", "exp", "pull", "origin", *EXPS)
    steps["compare"] = tool(b, "compare", *EXPS, "--json").stdout
    steps["compare_md"] = tool(b, "compare", *EXPS).stdout
    run(b, "dvc", "exp", "apply", EXPS[1])
    steps["shas_exp"] = cached_outputs(b)
    steps["audit_exp"] = tool(b, "audit", check=False)
    return {"a": a, "b": b, "origin": origin, "s3": s3, "shas_a": shas_a, "pushed": pushed,
            "exp_pushed": exp_pushed, "compare_a": compare_a,
            "compare_md_a": tool(a, "compare", *EXPS).stdout, **steps}


def test_fresh_clone_names_missing_files_and_dvc_pull(team: dict[str, Any]) -> None:
    assert team["empty_cache"]
    for key in ("audit_before", "compare_before", "compare_exps_before"):
        print(f"{key}: {team[key].stderr.strip()}")  # what a new user sees, in the CI log
    audit = team["audit_before"]
    assert audit.returncode == 1 and "Traceback" not in audit.stderr + audit.stdout
    msg = audit.stderr
    assert "missing from the workspace" in msg and "`dvc pull` brings them" in msg
    for path in ("data/raw", "data/items/rimo_n.parquet", "data/predictions/rimo_p.parquet",
                 "data/scores/rimo_n.parquet"):
        assert path in msg
    for key in ("compare_before", "compare_exps_before"):
        proc = team[key]
        assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr
        assert "data/scores/rimo_n.parquet, data/scores/rimo_p.parquet" in proc.stderr
        assert "missing from the local DVC cache" in proc.stderr
    # main is another revision than the workspace: its outputs come with `dvc fetch --rev`
    # (a `dvc pull` would fetch the workspace's), from the remote this clone has.
    assert ("`dvc fetch --rev " in team["compare_before"].stderr
            and "brings them from the DVC remote" in team["compare_before"].stderr)
    assert (f"of {EXPS[0]} " in team["compare_exps_before"].stderr
            and f"`dvc exp pull <git-remote> {EXPS[0]}`" in team["compare_exps_before"].stderr)


def test_pull_gives_byte_identical_artifacts_and_audit_passes(team: dict[str, Any]) -> None:
    assert team["shas_main"] == team["shas_a"]["main"]
    assert team["shas_exp"] == team["shas_a"][EXPS[1]]
    assert team["shas_a"][EXPS[0]] != team["shas_a"][EXPS[1]] != team["shas_a"]["main"]
    for key in ("audit_main", "audit_exp"):
        proc = team[key]
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_compare_in_b_equals_compare_in_a(team: dict[str, Any]) -> None:
    a, b = json.loads(team["compare_a"]), json.loads(team["compare"])
    assert a == b and team["compare_md_a"] == team["compare_md"]
    assert a["b"]["kind"] == "experiment" and a["b"]["label"] == EXPS[1]
    # Known differences: exp-y is wrong on ids 0-5, exp-z on 3-11 and misses id 20.
    flips = [f["a"] for f in a["tracks"][TRACK_N]["flips"]]
    assert (flips.count(True), flips.count(False)) == (7, 3)
    assert len(a["tracks"][TRACK_P]["flips"]) == 2


def test_the_remote_holds_the_data_and_the_credentials_stay_out_of_git(team: dict[str, Any]
                                                                       ) -> None:
    s3: S3Server = team["s3"]
    import s3fs

    fs = s3fs.S3FileSystem(key=s3.access_key, secret=s3.secret_key, endpoint_url=s3.endpoint_url)
    stored = fs.find(f"{s3.bucket}/rimo")
    assert len(stored) >= 10, stored  # parquet tables, raw files, .dir manifests, report
    config = (team["b"] / ".dvc/config").read_text()
    assert s3.endpoint_url in config and "access_key" not in config
    assert s3.access_key in (team["b"] / ".dvc/config.local").read_text()
    tracked = run(team["b"], "git", "ls-files").stdout.split()
    assert ".dvc/config" in tracked and ".dvc/config.local" not in tracked
    forms = {**{f"access key {k}": v for k, v in key_forms(s3.access_key).items()},
             **{f"secret {k}": v for k, v in key_forms(s3.secret_key).items()}}
    leaks = []
    for repo in (team["a"], team["b"], team["origin"]):
        objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"],
                                 cwd=repo, capture_output=True, check=True).stdout
        files = b"".join((repo / f).read_bytes() for f in run(repo, "git", "ls-files").stdout
                         .split() if (repo / f).is_file()) if repo != team["origin"] else b""
        logs = "".join(p.stdout + p.stderr for p in (team["pushed"], team["exp_pushed"],
                                                       team["pull"], team["exp_pull"])).encode()
        leaks += [f"{repo.name} {where}: {form}" for where, data in
                  (("git objects", objects), ("tracked files", files), ("dvc output", logs))
                  for form, needle in forms.items() if needle in data]
    assert leaks == []
    assert b"exp-y" in subprocess.run(["git", "for-each-ref", "refs/exps"], cwd=team["origin"],
                                      capture_output=True, check=True).stdout
