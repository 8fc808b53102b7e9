"""Sweep values are data, never code (issue 42 §2): through the real CLI, ``rimo-eval sweep
submit --dry-run`` in a real git project with a bare remote refuses every value that would
reach sweep.sbatch, a shell, Slurm or git as code, before any git command sees it; the script
it writes for the values it takes runs under bash (stubbed commands on PATH) without running
any of them; and every ``-S`` value reaches DVC's params.yaml as exactly the sweep file's
value, checked by a real ``dvc exp run``."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rimo_eval.commands.sweep.plan import Plan, read_sweep, resolve
from rimo_eval.commands.sweep.task import run_task
from tests.support.git_project import git, pushed_project
from tests.support.loopback import free_port
from tests.support.pipeline_repo import BIN, env

MODELS = [{"name": "m-a", "path": "/models/A"}, {"name": "m-b", "path": "/models/B"}]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project holding the real params.yaml, its commit on a bare remote `origin`."""
    return pushed_project(tmp_path)


def submit(work: Path, sweep: dict[str, Any] | str) -> subprocess.CompletedProcess[str]:
    path = work / "sweep.yaml"
    # JSON is YAML, with every control character escaped: each reaches the loader as it is.
    path.write_text(sweep if isinstance(sweep, str) else json.dumps(sweep), encoding="utf-8")
    return subprocess.run([str(BIN / "rimo-eval"), "sweep", "submit", "sweep.yaml",
                           "--dry-run"], cwd=work, env=env(), capture_output=True, text=True,
                          timeout=120)


def refused(work: Path, sweep: dict[str, Any] | str) -> str:
    proc = submit(work, sweep)
    assert proc.returncode == 1 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("rimo-eval sweep: error: sweep.yaml: "), proc.stderr
    return proc.stderr


def run_script(work: Path, script: str, tmp: Path) -> list[str]:
    """The script checked by ``bash -n`` and run by bash in a temp folder, every command it may
    call a stub that logs its argv; the argv of each stub call."""
    stubs, log = tmp / "stubs", tmp / "calls.log"
    stubs.mkdir(exist_ok=True)
    for name in ("rimo-eval", "python", "sh", "touch", "git", "dvc", "vllm", "module"):
        (stubs / name).write_text(f'#!/bin/bash\nprintf "%s\\0" {name} "$@" >> {log}\n'
                                  f'printf "\\n" >> {log}\n')
        (stubs / name).chmod(0o755)
    file = tmp / "sweep.sbatch"
    file.write_text(script, encoding="utf-8")
    subprocess.run(["bash", "-n", str(file)], check=True)
    proc = subprocess.run(["/bin/bash", str(file)], cwd=tmp, capture_output=True, text=True,
                          env={"PATH": str(stubs), "SLURM_ARRAY_TASK_ID": "0",
                               "HOME": str(tmp)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line for line in log.read_text().split("\n") if line] if log.exists() else []


def sbatch_before_commands(script: str) -> None:
    """Slurm reads #SBATCH lines only up to the first command: all of them come before it."""
    lines = script.splitlines()
    first = next(i for i, line in enumerate(lines)
                 if line.strip() and not line.startswith("#"))
    assert all(not line.startswith("#SBATCH") for line in lines[first:])
    assert all(line.startswith("#") for line in lines[:first]), lines[:first]


# --- control characters ------------------------------------------------------------------------


def _set(key: str, value: str) -> dict[str, Any]:
    sweep: dict[str, Any] = {"models": [dict(m) for m in MODELS], "git_remote": "origin"}
    target: Any = sweep
    *parents, last = key.split(".")
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
    target[last] = [value] if last in LISTS else value
    return sweep


LISTS = ("server_args", "options", "setup", "targets")


KEYS = ["models.1.path", "models.1.served_name", "server.args", "models.1.server_args",
        "server.command", "slurm.job_name", "slurm.options", "results", "workdir", "git_remote",
        "dvc_remote", "targets", "setup"]


@pytest.mark.parametrize(("key", "char"), [*((key, "\n") for key in KEYS), *(
    (key, char) for char in ("\r", "\x00", "\x1b", "\x85") for key in ("models.1.path",
                                                                       "git_remote"))])
def test_a_control_character_in_any_value_is_refused_naming_the_key(
        project: Path, tmp_path: Path, key: str, char: str) -> None:
    """Before: `path: "/m\\ntouch /tmp/x #"` passed --dry-run and its second line was a command
    of sweep.sbatch."""
    marker = tmp_path / "x"
    value = f"--x{char}touch {marker} #" if key == "slurm.options" else \
        f"/m{char}touch {marker} #"
    message = refused(project, _set(key, value))
    where = f"{key}.0" if key.endswith(LISTS) else key
    assert (f"sweep.yaml: {where}: holds the control character U+{ord(char):04X} at "
            f"character 2") in message or (key == "slurm.options" and "character 3" in message
                                           ), message
    assert not marker.exists()


def test_a_params_value_may_hold_tab_and_newline_but_no_other_control(project: Path) -> None:
    ok = submit(project, {"models": MODELS, "params": {
        "predict.openai.system_prompt": "line one\n\tline two"}})
    assert ok.returncode == 0, ok.stderr
    sbatch_before_commands(ok.stdout)
    assert "line one\\u000a\\u0009line two" in ok.stdout  # escaped in the listing's comment
    message = refused(project, {"models": MODELS, "params": {
        "predict.openai.system_prompt": "a\rb"}})
    assert "sweep.yaml: params.predict.openai.system_prompt: holds the control character " \
           "U+000D at character 1 (a params value may hold TAB and LF only)" in message


# --- git ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("remote", ["--upload-pack=touch {marker};x/",
                                    "-oProxyCommand=touch {marker}",
                                    "ext::sh -c touch% {marker}",
                                    "ssh://-oProxyCommand=touch%20{marker}/x",
                                    "foo://host/x", "a b"])
def test_a_git_remote_that_is_no_url_or_name_is_refused_before_git_runs(
        project: Path, tmp_path: Path, remote: str) -> None:
    """Before: `--upload-pack=touch X;x/` reached `git ls-remote` as an option and ran during
    --dry-run."""
    marker = tmp_path / "pwned"
    message = refused(project, {"models": MODELS, "git_remote": remote.format(marker=marker)})
    assert "sweep.yaml: git_remote: " in message
    assert not marker.exists()


@pytest.mark.parametrize("remote", ["origin", "git@example.org:team/rimo.git",
                                    "https://example.org/team/rimo.git",
                                    "ssh://git@example.org/rimo.git", "file:///srv/rimo.git",
                                    "/srv/git/rimo.git"])
def test_urls_and_remote_names_pass_the_check(remote: str) -> None:
    from rimo_eval.commands.sweep.values import check_git_remote

    assert check_git_remote("git_remote", remote) == remote


# --- the server command's placeholders ---------------------------------------------------------


def test_a_placeholder_in_a_shell_command_must_be_a_plain_word(project: Path,
                                                               tmp_path: Path) -> None:
    """Before: `sh -c 'exec serve {model_path}'` substituted the path unquoted into the script
    sh runs."""
    marker = tmp_path / "pwned"
    models = [{"name": "m-a", "path": f"/m'; touch {marker}; '"}]
    message = refused(project, {"models": models, "server": {
        "command": "sh -c 'exec serve {model_path} --port {port}'"}})
    assert "sweep.yaml: models.0.path: " in message and "plain word" in message
    assert '"$RIMO_MODEL_PATH"' in message
    assert not marker.exists()


def test_any_path_reaches_the_server_through_its_environment(tmp_path: Path) -> None:
    """The way the refusal points to: the value as one word, whatever it holds; the server (a
    shell script here) gets it exactly, and runs nothing of it."""
    marker, seen = tmp_path / "pwned", tmp_path / "seen"
    path = f"/m x/$(touch {marker})`touch {marker}`; touch {marker} '\""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"models": [{"name": "m-a", "path": path}], "server": {
        "command": f"sh -c 'printf %s \"$RIMO_MODEL_PATH\" > {seen}; exit 3'",
        "port": free_port()}, "workdir": str(tmp_path / "node")}), encoding="utf-8")
    git(tmp_path, "init", "-q", "--bare", str(tmp_path / "origin.git"))  # holds no experiment
    plan = resolve(read_sweep(sweep), repo=tmp_path, rev="ab" + "c" * 38,
                   git_url=str(tmp_path / "origin.git"), python=sys.executable)
    assert run_task(plan, 0) == 1  # its server exits: the task fails at that step
    assert seen.read_text(encoding="utf-8") == path
    assert not marker.exists()


def test_the_default_vllm_command_takes_any_path_as_one_word(project: Path) -> None:
    proc = submit(project, {"models": [{"name": "m-a", "path": "/data/my models/$(x)"}]})
    assert proc.returncode == 0, proc.stderr
    assert "server: vllm serve '/data/my models/$(x)' --host" in proc.stdout


@pytest.mark.parametrize("key", ["models.0.path", "models.0.served_name", "targets"])
def test_a_value_read_as_an_option_is_refused(project: Path, key: str) -> None:
    message = refused(project, _set(key, "--help"))
    assert "starts with '-'" in message


# --- the script --------------------------------------------------------------------------------


HOSTILE = ["$(touch {marker})", "`touch {marker}`", "; touch {marker}", "' ; touch {marker} '",
           "\" ; touch {marker} \"", "#!", "\\", "%s%n"]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_written_script_runs_no_value_as_code(project: Path, tmp_path: Path,
                                                  hostile: str) -> None:
    """Values the sweep takes (served names, server args, params, the sweep file's own name)
    appear in the script only as comments or quoted words: bash runs it (stubs on PATH) and
    only the task runner is called, with the plan."""
    marker = tmp_path / "pwned"
    value = hostile.format(marker=marker)
    sweep = {"models": [{"name": "m-a", "path": f"/m/{value}", "served_name": f"s{value}",
                         "server_args": [value], "params": {"predict.openai.system_prompt":
                                                            f"{value}\n{value}"}}],
             "server": {"args": shlex.join([value])}, "setup": ["module load x"],
             "slurm": {"options": [f"--comment={value}"]}}
    proc = submit(project, sweep)
    assert proc.returncode == 0, proc.stderr
    sbatch_before_commands(proc.stdout)
    calls = run_script(project, proc.stdout, tmp_path)
    plan = project / "sweep-results" / "plan.json"
    assert calls == ["module\0load\0x\0", f"rimo-eval\0sweep\0task\0{plan}\x000\0"]
    assert not marker.exists()


# --- -S values and DVC's grammar ---------------------------------------------------------------


TRICKY = {"predict.openai.system_prompt": "it's, a \"prompt\"\n\twith ${oc.env:HOME} \\' \\",
          "predict.openai.model_label": "1e3", "predict.constant.answer": "--help",
          "judge.model": "a,b", "predict.openai.seed": 7, "predict.limit": None,
          "predict.openai.extra_body": {"k": [1, "x,y", "1e3", None, True]}}


def test_a_comma_an_apostrophe_and_1e3_pass_dry_run_as_the_strings_they_are(
        project: Path) -> None:
    """Before: a comma made a Hydra sweep, an apostrophe a lexer error, "1e3" the float 1000.0:
    --dry-run took all three and the task failed on its node."""
    params = {k: v for k, v in TRICKY.items() if k not in ("predict.openai.model_label",
                                                           "predict.openai.extra_body")}
    proc = submit(project, {"models": MODELS, "params": {**params,
                                                         "predict.constant.answer": "1e3"}})
    assert proc.returncode == 0, proc.stderr
    assert "-S predict.constant.answer='1e3'" in proc.stdout


@pytest.mark.parametrize(("value", "why"), [
    ("yes", "as True"), ("on", "as True"), ("???", "Missing mandatory value")])
def test_a_value_dvc_would_change_is_refused_naming_the_key(project: Path, value: str,
                                                           why: str) -> None:
    message = refused(project, {"models": [{"name": "m-a", "params": {
        "predict.openai.model": value}}]})
    assert "sweep.yaml: models.0.params.predict.openai.model: " in message
    assert why in message, message


@pytest.mark.parametrize(("key", "value"), [("predict.openai.no_such_key", 1),
                                              ("predict.openai.extra_body", {"k": 1})])
def test_what_dvc_cannot_set_in_params_yaml_is_refused_at_dry_run(project: Path, key: str,
                                                                   value: Any) -> None:
    """A key params.yaml lacks, or a key inside an empty mapping (Hydra's struct mode): the
    task's `dvc exp run` would fail on its node."""
    message = refused(project, {"models": MODELS, "params": {key: value}})
    assert f"sweep.yaml: params.{key}: `dvc exp run -S " in message
    assert "Could not override" in message


def test_params_check_params_would_refuse_are_refused_at_dry_run(project: Path) -> None:
    message = refused(project, {"models": MODELS, "params": {"predict.openai.temperature": "hot"}})
    assert "with the -S values of models.0 (m-a)" in message
    assert "predict.openai.temperature" in message


@pytest.mark.slow
def test_every_value_reaches_dvc_exactly_as_written(tmp_path: Path) -> None:
    """A real `dvc exp run -S` of each word the plan holds, in a one-stage DVC project whose
    stage writes the params it got: each comes back as the sweep file's value, type too."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    subprocess.run(["dvc", "init", "-q"], cwd=work, check=True, env=env())
    base: dict[str, Any] = {}
    for key in [*TRICKY, "predict.backend", "predict.openai.base_url", "predict.openai.model",
                "predict.openai.cache_dir"]:
        node = base
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = "old"
    (work / "params.yaml").write_text(yaml.safe_dump(base), encoding="utf-8")
    (work / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"s": {
        "cmd": f"{sys.executable} -c \"import json, yaml; json.dump(yaml.safe_load("
               f"open('params.yaml')), open('out.json', 'w'))\"",
        "params": sorted({k.split('.')[0] for k in TRICKY}), "outs": ["out.json"]}}}))
    git(work, "add", "-A")
    git(work, "commit", "-qm", "x")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"models": [{"name": "m-a", "params": TRICKY}]}))
    plan = resolve(read_sweep(sweep), repo=work, rev="x" * 40, git_url="/srv/x.git",
                   python=sys.executable)  # no project params: not checked as check-params
    words = plan.tasks[0].overrides[4:]  # the sweep's own four are plain
    subprocess.run(["dvc", "exp", "run", *(a for w in words for a in ("-S", w))], cwd=work,
                   check=True, env=env(), capture_output=True, timeout=300)
    got = json.loads((work / "out.json").read_text())
    for key, value in TRICKY.items():
        node = got
        for part in key.split("."):
            node = node[part]
        assert node == value and type(node) is type(value), key


def test_the_plan_keeps_the_server_environment(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"models": MODELS}))
    plan = resolve(read_sweep(sweep), repo=tmp_path, rev="a" * 40, git_url="/x.git",
                   python=sys.executable)
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    assert Plan.from_file(path).tasks[1].server_env == {
        "RIMO_MODEL_PATH": "/models/B", "RIMO_PORT": "8001", "RIMO_NAME": "m-b",
        "RIMO_SERVED_NAME": "m-b"}
