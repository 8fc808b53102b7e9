"""The sweep file (YAML) and the plan resolved from it: one array task per model.

A sweep file names the models, the ``-S`` overrides each one changes, the server recipe that
stands in for each node's model server (vLLM by default), and where results go. The plan is
what every array task reads (``plan.json`` beside the sbatch script): the file as it was at
submission, resolved against the repo (its commit, the git remote's URL), so that editing the
sweep file later changes no task already queued. Nothing in either may hold a secret: keys and
credentials come from the environment of the job (sbatch passes the submitting shell's).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rimo_eval.core.yaml_file import load_unique
from rimo_eval.errors import ConfigError

# What vLLM's OpenAI-compatible server is started with; {placeholders} are filled per task.
VLLM_COMMAND = ("vllm serve {model_path} --host 127.0.0.1 --port {port} "
                "--served-model-name {served_name}")
DEFAULT_PORT = 8000
DEFAULT_READY_S = 1800.0  # a large model's weights can take many minutes to load
DEFAULT_WORKDIR = "/tmp/rimo-sweep"  # node-local disk: the clones and the response cache
# An experiment name is a git ref component (refs/exps/../NAME) and a file name here.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# Set by the sweep itself from the task's server: a sweep file that sets them is refused.
OWNED_KEYS = ("predict.backend", "predict.openai.base_url")
_TOP = {"models", "params", "server", "slurm", "setup", "targets", "git_remote", "dvc_remote",
        "results", "workdir"}
_SERVER = {"command", "args", "port", "ready_timeout_s"}
_SLURM = {"job_name", "options", "max_parallel"}
_MODEL = {"name", "path", "served_name", "params", "server_args"}


@dataclass(frozen=True)
class Task:
    index: int
    name: str
    port: int
    server: list[str]  # the server's argv
    overrides: list[str]  # KEY=VALUE, each passed as -S


@dataclass(frozen=True)
class Plan:
    sweep_file: str
    sweep_sha256: str
    repo: str  # the submitting repo (the job's working folder)
    rev: str  # the commit every experiment is based on
    git_url: str  # the team's git remote: cloned from, pushed to
    dvc_remote: str | None
    results: str
    workdir: str
    targets: list[str]
    ready_timeout_s: float
    job_name: str
    slurm_options: list[str]
    max_parallel: int | None
    setup: list[str]
    python: str  # the interpreter that runs each task (the submitting venv's, by default)
    tasks: list[Task] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @staticmethod
    def from_file(path: Path) -> Plan:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            tasks = [Task(**t) for t in raw.pop("tasks")]
            return Plan(**raw, tasks=tasks)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ConfigError(f"{path}: not a sweep plan written by `rimo-eval sweep submit` "
                              f"({exc})") from exc

    def task(self, index: int) -> Task:
        for task in self.tasks:
            if task.index == index:
                return task
        raise ConfigError(f"{self.sweep_file}: no task {index} in this sweep "
                          f"(0-{len(self.tasks) - 1})")


@dataclass(frozen=True)
class SweepFile:
    path: Path
    sha256: str
    data: dict[str, Any]


def read_sweep(path: Path) -> SweepFile:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the sweep file ({exc.strerror})") from exc
    try:
        data = load_unique(raw.decode("utf-8"), path)
    except (UnicodeDecodeError, ValueError) as exc:  # yaml.YAMLError and duplicates too
        raise ConfigError(f"{path}: not a YAML sweep file: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError is not a ValueError
        raise ConfigError(f"{path}: not a YAML sweep file: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a sweep file is a mapping with a `models` list")
    return SweepFile(path, hashlib.sha256(raw).hexdigest(), data)


def _section(sweep: SweepFile, key: str, allowed: set[str]) -> dict[str, Any]:
    value = sweep.data.get(key) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{sweep.path}: {key}: must be a mapping")
    _known_keys(sweep, key, value, allowed)
    return value


def _known_keys(sweep: SweepFile, where: str, value: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ConfigError(f"{sweep.path}: {where}.{unknown[0]}: unknown key (known: "
                          f"{', '.join(sorted(allowed))})")


def _strings(sweep: SweepFile, where: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value) if where.endswith("args") else [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{sweep.path}: {where}: must be a list of strings")
    return list(value)


def s_value(value: Any) -> str:
    """A value as ``dvc exp run -S key=VALUE`` parses it (YAML): JSON is YAML, and a plain
    string that YAML reads back as itself goes as it is."""
    if isinstance(value, str):
        import yaml

        try:
            if yaml.safe_load(value) == value and "\n" not in value:
                return value
        except yaml.YAMLError:
            pass
    return json.dumps(value, ensure_ascii=False)


def _overrides(sweep: SweepFile, where: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{sweep.path}: {where}: must map a params key path "
                          f"(predict.openai.max_tokens) to its value")
    for key in value:
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][\w.-]*", key):
            raise ConfigError(f"{sweep.path}: {where}: {key!r} is not a params key path")
        if key in OWNED_KEYS:
            raise ConfigError(f"{sweep.path}: {where}.{key}: set by the sweep itself (each "
                              f"task talks to the server it starts on its node); remove it")
        leaf = key.rsplit(".", 1)[-1].lower()
        if any(word in leaf for word in ("api_key", "secret", "password", "token")) \
                and leaf != "api_key_env" and "tokens" not in leaf:
            raise ConfigError(f"{sweep.path}: {where}.{key}: no secret in a sweep file; name "
                              f"the environment variable that holds it "
                              f"(predict.openai.api_key_env) and export it before submitting")
    return dict(value)


def check_url(url: str, where: str) -> str:
    """A git URL with a password in it would be written into the plan, the clones and what
    the sweep prints; so would a token given as an HTTP(S) URL's user name
    (``https://<token>@github.com/...``, which GitHub accepts): neither is taken."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and (parts.password or parts.username):
        held = "a password" if parts.password else "a user name (a token?)"
        raise ConfigError(f"{where}: the git URL holds {held}; use a credential helper "
                          f"or an SSH key (secrets come from the environment only)")
    return url


def resolve(sweep: SweepFile, *, repo: Path, rev: str, git_url: str, python: str) -> Plan:
    """The plan of ``sweep`` at commit ``rev`` of ``repo``: every check that can fail before
    anything is submitted fails here, naming the file and the key."""
    unknown = sorted(set(sweep.data) - _TOP)
    if unknown:
        raise ConfigError(f"{sweep.path}: {unknown[0]}: unknown key (known: "
                          f"{', '.join(sorted(_TOP))})")
    server = _section(sweep, "server", _SERVER)
    slurm = _section(sweep, "slurm", _SLURM)
    common = _overrides(sweep, "params", sweep.data.get("params"))
    port = server.get("port", DEFAULT_PORT)
    if not isinstance(port, int) or not 1024 <= port <= 65000:
        raise ConfigError(f"{sweep.path}: server.port: a port number from 1024 to 65000")
    ready = server.get("ready_timeout_s", DEFAULT_READY_S)
    if not isinstance(ready, (int, float)) or ready <= 0:
        raise ConfigError(f"{sweep.path}: server.ready_timeout_s: a positive number of seconds")
    template = server.get("command") or VLLM_COMMAND
    if not isinstance(template, str):
        raise ConfigError(f"{sweep.path}: server.command: a command line (a string)")
    models = sweep.data.get("models")
    if not isinstance(models, list) or not models:
        raise ConfigError(f"{sweep.path}: models: a list of models, each with a name")
    tasks, seen = [], set()
    workdir = str(sweep.data.get("workdir") or DEFAULT_WORKDIR)
    for index, model in enumerate(models):
        where = f"models.{index}"
        if not isinstance(model, dict):
            raise ConfigError(f"{sweep.path}: {where}: a mapping with name, path, params")
        _known_keys(sweep, where, model, _MODEL)
        name = model.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(f"{sweep.path}: {where}.name: {name!r}: an experiment name "
                              f"(letters, digits, . _ -; it names a git ref)")
        if name in seen:
            raise ConfigError(f"{sweep.path}: {where}.name: {name} is given twice")
        seen.add(name)
        served = str(model.get("served_name") or name)
        task_port = port + index  # tasks that share a node each get their own port
        fields = {"model_path": str(model.get("path") or name), "port": task_port,
                  "name": name, "served_name": served}
        try:
            argv = [part.format(**fields) for part in shlex.split(template)]
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"{sweep.path}: server.command: {exc} is not one of "
                              f"{{model_path}}, {{port}}, {{name}}, {{served_name}}") from exc
        argv += _strings(sweep, "server.args", server.get("args"))
        argv += _strings(sweep, f"{where}.server_args", model.get("server_args"))
        own = _overrides(sweep, f"{where}.params", model.get("params"))
        values: dict[str, Any] = {
            "predict.backend": "openai",
            "predict.openai.base_url": f"http://127.0.0.1:{task_port}/v1",
            "predict.openai.model": served,
            # One SQLite cache per node, on its local disk (never a network filesystem).
            "predict.openai.cache_dir": f"{workdir}/cache",
            **common, **own}
        tasks.append(Task(index, name, task_port, argv,
                          [f"{k}={s_value(v)}" for k, v in values.items()]))
    max_parallel = slurm.get("max_parallel")
    if max_parallel is not None and (not isinstance(max_parallel, int) or max_parallel < 1):
        raise ConfigError(f"{sweep.path}: slurm.max_parallel: a positive integer (or null)")
    job_name = str(slurm.get("job_name") or "rimo-sweep")
    options = _strings(sweep, "slurm.options", slurm.get("options"))
    for option in options:
        if not option.startswith("--") or "\n" in option:
            raise ConfigError(f"{sweep.path}: slurm.options: {option!r}: one sbatch long "
                              f"option per entry (--partition=gpu)")
    results = Path(str(sweep.data.get("results") or "sweep-results"))
    dvc_remote = sweep.data.get("dvc_remote")
    return Plan(
        sweep_file=str(sweep.path), sweep_sha256=sweep.sha256, repo=str(repo), rev=rev,
        git_url=check_url(git_url, f"{sweep.path}: git_remote"),
        dvc_remote=None if dvc_remote is None else str(dvc_remote),
        results=str(results if results.is_absolute() else repo / results),
        workdir=workdir, targets=_strings(sweep, "targets", sweep.data.get("targets")),
        ready_timeout_s=float(ready), job_name=job_name, slurm_options=options,
        max_parallel=max_parallel, setup=_strings(sweep, "setup", sweep.data.get("setup")),
        python=python, tasks=tasks)
