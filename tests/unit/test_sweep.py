"""``rimo-eval sweep`` without a cluster: the sweep file's checks, the generated script, and an
array task's own steps run directly (skip by name on a real bare git remote; a server that
never gets ready; a server that dies; a DVC push that fails, on a real DVC project), each
leaving its record."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rimo_eval.commands.sweep.overrides import hydra_value
from rimo_eval.commands.sweep.plan import Plan, SweepFile, read_sweep, resolve
from rimo_eval.commands.sweep.remote import exp_ref
from rimo_eval.commands.sweep.script import array_spec, render
from rimo_eval.commands.sweep.task import run_task
from rimo_eval.errors import ConfigError
from tests.support.loopback import free_port

REV = "ab" + "c" * 38
BASE: dict[str, object] = {"models": [{"name": "m-a", "path": "/models/A"},
                   {"name": "m-b", "path": "/models/B", "params": {"predict.openai.seed": 7}}],
        "params": {"predict.limit": None}}


def sweep_file(tmp_path: Path, data: dict[str, object]) -> SweepFile:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return read_sweep(path)


def plan_of(tmp_path: Path, data: dict[str, object], url: str = "/srv/git/rimo.git") -> Plan:
    return resolve(sweep_file(tmp_path, data), repo=tmp_path, rev=REV, git_url=url,
                   python="/venv/bin/python")


def test_each_task_gets_its_server_port_and_overrides(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, BASE)
    a, b = plan.tasks
    assert (a.port, b.port) == (8000, 8001)
    assert a.server == ["vllm", "serve", "/models/A", "--host", "127.0.0.1", "--port", "8000",
                        "--served-model-name", "m-a"]
    assert b.overrides == ["predict.backend='openai'",
                           "predict.openai.base_url='http://127.0.0.1:8001/v1'",
                           "predict.openai.model='m-b'",
                           "predict.openai.cache_dir='/tmp/rimo-sweep/cache'",
                           "predict.limit=null", "predict.openai.seed=7"]
    assert Plan.from_file(_written(tmp_path, plan)) == plan


def _written(tmp_path: Path, plan: Plan) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    return path


@pytest.mark.parametrize("value, text", [
    (None, "null"), (3, "3"), (0.6, "0.6"), ("gpt-4o", "'gpt-4o'"), ("07", "'07'"),
    ("true", "'true'"), ("1e3", "'1e3'"), ("a,b", "'a,b'"), ("it's", "'it\\'s'"),
    ("x\\", "'x\\\\'"), ("${oc.env:HOME}", "'\\${oc.env:HOME}'"),
    ({"k": [1, "a"]}, "{k:[1,'a']}")])
def test_override_values_are_written_in_dvcs_override_grammar(value: object, text: str) -> None:
    """Hydra's grammar, which DVC reads -S with (test_sweep_values.py runs DVC's own parser)."""
    assert hydra_value(value) == text


@pytest.mark.parametrize("change, message", [
    ({"models": [{"name": "m a"}]}, "models.0.name: 'm a': an experiment name"),
    ({"models": [{"name": "x"}, {"name": "x"}]}, "models.1.name: x is given twice"),
    ({"params": {"predict.openai.api_key": "sk-1"}}, "params.predict.openai.api_key: no secret"),
    ({"params": {"predict.backend": "oracle"}}, "params.predict.backend: set by the sweep"),
    ({"server": {"prot": 1}}, "server.prot: unknown key"),
    ({"server": {"command": "serve {path}"}}, "'path' is not one of"),
    ({"slurm": {"options": ["-p gpu"]}}, "one sbatch long option per entry"),
    ({"models": []}, "models: a list of models"),
])
def test_a_bad_sweep_file_is_refused_naming_the_key(tmp_path: Path, change: dict[str, object],
                                                    message: str) -> None:
    with pytest.raises(ConfigError, match=r"sweep\.yaml: ") as err:
        plan_of(tmp_path, {**BASE, **change})
    assert message in str(err.value)


@pytest.mark.parametrize(("url", "held"), [
    ("https://me:hunter2@git.example.org/rimo.git", "a password"),
    ("https://ghp_0123456789abcdef@github.com/team/rimo.git", "a user name (a token?)")])
def test_credentials_in_the_git_url_are_refused(tmp_path: Path, url: str, held: str) -> None:
    with pytest.raises(ConfigError, match=r"git_remote: the git URL holds ") as err:
        plan_of(tmp_path, BASE, url=url)
    assert held in str(err.value) and "hunter2" not in str(err.value) \
        and "ghp_" not in str(err.value)


def test_the_script_lists_the_tasks_and_runs_the_plan(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, {**BASE, "slurm": {"max_parallel": 2, "options": ["--gres=gpu:1"]},
                              "setup": ["source /venv/bin/activate"]})
    script = render(plan)
    assert "#SBATCH --array=0-1%2\n#SBATCH --output=" in script and "#SBATCH --gres=gpu:1" in script
    assert "-S predict.openai.seed=7" in script and "server: vllm serve /models/B" in script
    assert "#SBATCH --array=0-1%2" in script.split("\nset -euo pipefail\n")[0]
    # With setup lines the venv they activate runs the task, not the submitting interpreter.
    assert script.endswith('source /venv/bin/activate\nexec rimo-eval sweep task '
                           f'{tmp_path}/sweep-results/plan.json "$SLURM_ARRAY_TASK_ID"\n')
    assert array_spec([2, 0, 1], None) == "0-2" and array_spec([1, 4], 3) == "1,4%3"
    assert array_spec([2], None) == "2"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout


def bare_remote(tmp_path: Path) -> tuple[Path, str]:
    """A bare repo with one commit on main: the team's git remote."""
    work, origin = tmp_path / "work", tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "f").write_text("x")
    git(work, "add", "f")
    git(work, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "x")
    git(work, "push", "-q", str(origin), "main")
    return origin, git(work, "rev-parse", "HEAD").strip()


def server_plan(tmp_path: Path, command: str, ready_s: float = 60) -> Plan:
    origin, rev = bare_remote(tmp_path)
    # A free port: nothing else on the machine answers the readiness probe.
    server = {"command": command, "ready_timeout_s": ready_s, "port": free_port()}
    plan = plan_of(tmp_path, {**BASE, "server": server, "workdir": str(tmp_path / "node")},
                   url=str(origin))
    return Plan(**{**plan.__dict__, "rev": rev})


def test_a_task_already_on_the_remote_is_skipped_by_name(tmp_path: Path) -> None:
    plan = server_plan(tmp_path, "false")  # a server that would fail: never started
    origin = Path(plan.git_url)
    sha = git(origin, "rev-parse", "main").strip()
    git(origin, "update-ref", exp_ref(plan.rev, "m-b"), sha)
    assert run_task(plan, 1) == 0
    record = json.loads((Path(plan.results) / "m-b.json").read_text())
    assert record["status"] == "skipped" and record["commit"] == sha
    assert exp_ref(plan.rev, "m-b") in record["reason"]
    assert run_task(plan, 0) == 1  # m-a is not there: it runs, and its server fails


def test_a_server_that_never_gets_ready_fails_the_task_at_its_deadline(tmp_path: Path) -> None:
    # Listens on nothing and never exits: only the deadline ends the wait.
    plan = server_plan(tmp_path, f"{sys.executable} -c 'import time; time.sleep(60)'", 1.5)
    started = time.monotonic()
    assert run_task(plan, 0) == 1
    assert time.monotonic() - started < 15  # the server was stopped, not waited for
    record = json.loads((Path(plan.results) / "m-a.json").read_text())
    assert record["status"] == "failed" and record["step"] == "server"
    assert "not ready after 1.5 s (server.ready_timeout_s)" in record["reason"]
    port = plan.tasks[0].port
    assert f"GET http://127.0.0.1:{port}/v1/models never answered 200" in record["reason"]


def test_a_server_that_exits_fails_the_task_with_its_log(tmp_path: Path) -> None:
    plan = server_plan(tmp_path, f"{sys.executable} -c \"import sys; print('CUDA out of "
                                 f"memory'); sys.exit(3)\"")
    assert run_task(plan, 0) == 1
    record = json.loads((Path(plan.results) / "m-a.json").read_text())
    assert record["status"] == "failed" and record["step"] == "server"
    assert "exited (3) before it was ready" in record["reason"]
    assert "CUDA out of memory" in record["reason"]


def test_without_slurm_the_cluster_helper_says_what_is_missing(monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    from tests.support import slurm

    monkeypatch.setattr(slurm, "_which", lambda name: None if name == "slurmd" else "/bin/x")
    reason = slurm.unavailable()
    assert reason is not None and "missing slurmd" in reason and "make slurm" in reason


READY_SERVER = """import http.server, sys

class Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # /v1/models: ready
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ready).serve_forever()
"""


def dvc_remote_repo(tmp_path: Path, remote: Path) -> tuple[Path, str]:
    """A bare git remote holding a one-stage DVC project (its output made from the predict
    params the task sets) whose default DVC remote is ``remote``."""
    work, origin = tmp_path / "work", tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    subprocess.run(["dvc", "init", "-q"], cwd=work, check=True)
    (work / "params.yaml").write_text(yaml.safe_dump({"predict": {
        "backend": "constant", "limit": 3,
        "openai": {"base_url": None, "model": None, "cache_dir": None}}}))
    (work / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"predict": {
        "cmd": f"{sys.executable} -c \"import yaml; open('out.txt', 'w').write("
               f"repr(yaml.safe_load(open('params.yaml'))))\"",
        "params": ["predict"], "outs": ["out.txt"]}}}))
    subprocess.run(["dvc", "remote", "add", "-d", "team", str(remote)], cwd=work, check=True)
    (work / ".gitignore").write_text("/out.txt\n")
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "a dvc project")
    git(work, "push", "-q", str(origin), "main")
    return origin, git(work, "rev-parse", "HEAD").strip()


@pytest.mark.slow
def test_a_failed_data_push_pushes_no_ref_and_the_retry_pushes_both(tmp_path: Path) -> None:
    """The push sends the data first, then the experiment's ref: when `dvc push` fails (here
    the DVC remote is a file, not a folder), the git remote gets no ref, so no experiment on
    it lacks its files. Once the remote is fixed, the same task pushes the data and the ref."""
    remote = tmp_path / "dvc-remote"
    remote.write_text("not a folder")
    origin, rev = dvc_remote_repo(tmp_path, remote)
    script = tmp_path / "ready_server.py"  # a model server that is ready at once
    script.write_text(READY_SERVER)
    server = {"command": f"{sys.executable} {script} {{port}}", "ready_timeout_s": 30,
              "port": free_port()}
    plan = plan_of(tmp_path, {**BASE, "server": server, "workdir": str(tmp_path / "node")},
                   url=str(origin))
    plan = Plan(**{**plan.__dict__, "rev": rev})
    assert run_task(plan, 0) == 1
    record = json.loads((Path(plan.results) / "m-a.json").read_text())
    assert record["status"] == "failed" and record["step"] == "push", record
    assert "dvc push (the data) failed" in record["reason"], record["reason"]
    assert git(origin, "for-each-ref", "refs/exps") == ""  # no ref without its data

    remote.unlink()  # the remote fixed: the task runs again and pushes both
    assert run_task(plan, 0) == 0
    record = json.loads((Path(plan.results) / "m-a.json").read_text())
    assert record["status"] == "pushed", record
    ref = exp_ref(rev, "m-a")
    assert git(origin, "rev-parse", ref).strip() == record["commit"]
    # The ref's output is in the DVC remote: its dvc.lock names an md5 the remote holds.
    lock = yaml.safe_load(git(origin, "show", f"{ref}:dvc.lock"))
    md5 = lock["stages"]["predict"]["outs"][0]["md5"]
    assert (remote / "files/md5" / md5[:2] / md5[2:]).is_file()
