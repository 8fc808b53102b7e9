"""A model sweep on a real Slurm cluster (issue 34): three models, a three-task job array.

The test starts everything itself: a single-node Slurm (munged, slurmctld, slurmd on
127.0.0.1, tests/support/slurm.py), SeaweedFS as the team's S3 remote, a bare git repo as its
git remote. Each task's "vLLM" is the fake chat server (tests/support/sweep_model.py), told by
its model folder which RIMO-N items it gets right (all, some, none), so the three models'
numbers differ. The m-weak task is held at its first chat request and cancelled with
``scancel``: its record says so and nothing of it reaches the remote; ``sweep submit`` again
submits that task alone and it finishes. A fresh clone then pulls every experiment and
``rimo-eval leaderboard --all`` ranks them with the numbers the same three experiments give
when run locally with ``dvc exp run``. Without Slurm or root (a CI sandbox) it is skipped and
says why.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from rimo_eval.commands.sweep.remote import exp_ref
from tests.chat_server import ChatServer, free_port
from tests.conftest import REPO_ROOT
from tests.pipeline_repo import copy_repo, env
from tests.s3_server import S3Server
from tests.support import slurm
from tests.support.sweep_model import responder

pytestmark = pytest.mark.slow

MODELS = {"m-strong": "all", "m-mid": "even", "m-weak": "none"}  # name -> which items it solves
KILLED = "m-weak"
LIMIT = 4  # items per track: the fewest where the three models' RIMO-N accuracies differ
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


def run(cwd: Path, *args: str, extra: dict[str, str] | None = None, check: bool = True,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in env().items() if k not in AWS_VARS}
    e.update(extra or {})
    proc = subprocess.run(args, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def free_run_of_ports(n: int) -> int:
    """A port p with p .. p+n-1 all free (each task serves on base port + its index)."""
    for _ in range(50):
        base = free_port()
        try:
            for port in range(base, base + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {n} consecutive free ports")


def wait_for(check: Any, what: str, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def records(results: Path) -> dict[str, dict[str, Any]]:
    return {name: json.loads((results / f"{name}.json").read_text()) for name in MODELS
            if (results / f"{name}.json").exists()}


def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.fixture(scope="module")
def sweep(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[dict[str, Any]]:
    reason = slurm.unavailable()
    if reason:  # before the oracle run is built for nothing
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    oracle_run: Path = request.getfixturevalue("oracle_run")
    top = tmp_path_factory.mktemp("sweep")
    started = time.monotonic()
    try:
        cluster = slurm.Cluster(top / "slurm").start()
    except RuntimeError as exc:  # a sandbox that forbids what the daemons need
        print(f"SKIPPED: Slurm cannot start here: {exc}")
        pytest.skip(f"Slurm cannot start here: {str(exc)[:500]}")
    s3 = S3Server(top / "s3").start()
    creds = {**s3.env(), **cluster.env()}
    try:
        origin = top / "origin.git"
        run(top, "git", "init", "-q", "--bare", "-b", "main", str(origin))
        a = copy_repo(oracle_run, top / "a")
        items = pd.read_parquet(a / "data/items/rimo_n.parquet")
        answers = top / "answers.json"  # gold answers, for the fake models only (not committed)
        answers.write_text(json.dumps(dict(zip(items["problem"], items["answer"], strict=True))))
        hold = top / "hold"  # m-weak's server waits while this exists
        hold.touch()
        for name, right in MODELS.items():
            folder = top / "models" / name
            folder.mkdir(parents=True)
            (folder / "model.json").write_text(json.dumps({
                "answers": str(answers), "right": right,
                "hold": str(hold) if name == KILLED else None}))
        base_port = free_run_of_ports(len(MODELS))
        sweep_file = {
            "git_remote": "origin", "results": "sweep-results", "workdir": str(top / "node"),
            "targets": ["score"],
            "params": {"predict.limit": LIMIT, "predict.openai.max_retries": 0},
            "server": {"command": f"env PYTHONPATH={REPO_ROOT} {env()['PATH'].split(':')[0]}"
                                  f"/python -m tests.support.sweep_model --port {{port}} "
                                  f"--model-dir {{model_path}}",
                       "port": base_port, "ready_timeout_s": 60},
            "slurm": {"job_name": "rimo-test-sweep", "options": ["--time=00:20:00"]},
            "models": [{"name": name, "path": str(top / "models" / name)} for name in MODELS]}
        (a / "sweep.yaml").write_text(yaml.safe_dump(sweep_file, sort_keys=False))
        run(a, "dvc", "remote", "add", "-d", "team", f"s3://{s3.bucket}/rimo")
        run(a, "dvc", "remote", "modify", "team", "endpointurl", s3.endpoint_url)
        (a / ".gitignore").write_text((a / ".gitignore").read_text() + "/sweep-results/\n")
        run(a, "git", "add", "-A")
        run(a, "git", "commit", "-qm", "a team remote and a sweep")
        run(a, "git", "remote", "add", "origin", str(origin))
        run(a, "git", "push", "-q", "origin", "main")
        run(a, "dvc", "push", "-q", extra=creds)  # the baseline's outputs: the clones pull them
        setup_s = time.monotonic() - started

        dry = run(a, "rimo-eval", "sweep", "submit", "sweep.yaml", "--dry-run", extra=creds)
        first = run(a, "rimo-eval", "sweep", "submit", "sweep.yaml", extra=creds)
        job = first.stdout.split("submitted job ")[1].split(":")[0]
        requests = top / "models" / KILLED / "requests.log"
        wait_for(requests.exists, f"{KILLED}'s first chat request")
        killed_index = list(MODELS).index(KILLED)
        cluster.client("scancel", f"{job}_{killed_index}")
        cluster.wait_done(job)
        records_1 = records(a / "sweep-results")
        refs_1 = run(a, "git", "ls-remote", str(origin), "refs/exps/*").stdout
        hold.unlink()  # the model is "fixed": the re-submitted task runs through
        again = run(a, "rimo-eval", "sweep", "submit", "sweep.yaml", extra=creds)
        job_2 = again.stdout.split("submitted job ")[1].split(":")[0]
        cluster.wait_done(job_2)
        records_2 = records(a / "sweep-results")
        status = run(a, "rimo-eval", "sweep", "status", "sweep.yaml", "--json", extra=creds,
                     check=False)
        sweep_s = time.monotonic() - started - setup_s

        b = top / "b"  # a colleague's fresh clone, its credentials in the environment
        run(top, "git", "clone", "-q", str(origin), str(b))
        run(b, "dvc", "exp", "pull", "origin", *MODELS, extra=creds)
        board = json.loads(run(b, "rimo-eval", "leaderboard", "--all", "--json",
                               "--samples", "200", extra=creds).stdout)

        # The same three experiments run locally, one after the other, on in-process servers.
        plan = json.loads((a / "sweep-results/plan.json").read_text())
        local: dict[str, dict[str, Any]] = {}
        for task in plan["tasks"]:
            server = ChatServer(responder=responder(top / "models" / task["name"])).start()
            try:
                sets = [a_ for o in task["overrides"] if not o.startswith(
                    ("predict.openai.base_url=", "predict.openai.cache_dir="))
                    for a_ in ("-S", o)]
                run(a, "dvc", "exp", "run", "-n", f"local-{task['name']}", "score", *sets,
                    "-S", "predict.backend=openai", "-S",
                    f"predict.openai.base_url={server.base_url}")
                local[task["name"]] = json.loads((a / "reports/metrics.json").read_text())
            finally:
                server.stop()
        timing = {"setup_s": setup_s, "sweep_s": sweep_s,
                  "total_s": time.monotonic() - started, "slurm_start_s": cluster.started_s}
        print(f"sweep test timing: {json.dumps({k: round(v, 1) for k, v in timing.items()})}")
        yield {"a": a, "b": b, "origin": origin, "job": job, "first": first, "again": again,
               "dry": dry, "records_1": records_1, "refs_1": refs_1, "records_2": records_2,
               "status": status, "board": board, "local": local, "plan": plan, "s3": s3,
               "rev": plan["rev"], "timing": timing}
    finally:
        cluster.stop()
        s3.stop()


def test_the_killed_task_says_so_and_pushes_nothing(sweep: dict[str, Any]) -> None:
    first = sweep["records_1"]
    assert {n: r["status"] for n, r in first.items()} == {
        "m-strong": "pushed", "m-mid": "pushed", KILLED: "failed"}, first
    reason = first[KILLED]["reason"]
    assert "cancelled by SIGTERM" in reason and "during step run" in reason, reason
    assert "nothing of it was pushed" in reason
    refs = sweep["refs_1"]
    for name in ("m-strong", "m-mid"):
        assert exp_ref(sweep["rev"], name) in refs
    assert f"/{KILLED}" not in refs  # no ref: the remote holds no half of it


def test_resubmission_runs_only_what_is_missing(sweep: dict[str, Any]) -> None:
    again = sweep["again"]
    for name in ("m-strong", "m-mid"):
        assert f"{name}: already on " in again.stderr and "not submitted" in again.stderr
    assert f"1 task(s) ({KILLED})" in again.stdout, again.stdout
    second = sweep["records_2"]
    assert {n: r["status"] for n, r in second.items()} == dict.fromkeys(MODELS, "pushed")
    # The finished tasks were not run again: their records are those of the first job.
    for name in ("m-strong", "m-mid"):
        assert second[name] == sweep["records_1"][name]
    assert second[KILLED]["job"] != sweep["records_1"][KILLED]["job"]
    status = json.loads(sweep["status"].stdout)
    assert sweep["status"].returncode == 0 and all(t["on_remote"] for t in status["tasks"])
    assert status["collect"][0] == f"dvc exp pull {sweep['origin']} {' '.join(MODELS)}"


def test_the_script_holds_the_sweep_and_no_secret(sweep: dict[str, Any]) -> None:
    script = (sweep["a"] / "sweep-results/sweep.sbatch").read_text()
    assert sweep["dry"].stdout == script
    assert "#SBATCH --array=0-2" in script and "#SBATCH --time=00:20:00" in script
    assert 'sweep task' in script and '"$SLURM_ARRAY_TASK_ID"' in script
    s3: S3Server = sweep["s3"]
    written = [script, (sweep["a"] / "sweep-results/plan.json").read_text(),
               *(p.read_text(errors="replace") for p in (sweep["a"] / "sweep-results").rglob("*")
                 if p.is_file())]
    assert not [w for w in written if s3.secret_key in w or s3.access_key in w]
    # Nor in anything the tasks pushed to the team's git remote.
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"],
                             cwd=sweep["origin"], capture_output=True, check=True).stdout
    assert s3.secret_key.encode() not in objects and s3.access_key.encode() not in objects


def test_fresh_clone_ranks_the_sweep_with_the_local_numbers(sweep: dict[str, Any]) -> None:
    runs = {r["label"]: r for r in sweep["board"]["runs"]}
    assert set(runs) == set(MODELS), (set(runs), sweep["board"].get("left_out"))
    accuracy = {name: runs[name]["RIMO-N.accuracy"] for name in MODELS}
    assert accuracy["m-strong"] == 1.0 and accuracy["m-weak"] == 0.0
    assert 0.0 < accuracy["m-mid"] < 1.0, accuracy  # three different numbers
    ranks = {name: runs[name]["rank"]["rank"] for name in MODELS}
    assert ranks == {"m-strong": 1, "m-mid": 2, "m-weak": 3}
    for name, metrics in sweep["local"].items():
        numbers = {k: v for k, v in flat(metrics).items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        assert "RIMO-N.accuracy" in numbers
        on_board = {k: runs[name][k] for k in numbers if k in runs[name]}
        assert on_board == {k: numbers[k] for k in on_board}, name
        assert len(on_board) >= 10, sorted(on_board)
