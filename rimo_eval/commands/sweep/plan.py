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
from string import Formatter
from typing import Any
from urllib.parse import urlsplit

from rimo_eval.commands.sweep.overrides import Entry, round_trip, word
from rimo_eval.commands.sweep.values import (
    check_git_remote,
    check_strings,
    not_option,
    plain_word,
    slurm_word,
)
from rimo_eval.errors import ConfigError
from rimo_eval.io.surrogates import escaped
from rimo_eval.params.yaml_file import load_unique

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
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")  # a params key path
# Each placeholder's value is also in the server's environment, for a command that needs a
# value that is not a plain word (values.plain_word): sh -c 'exec vllm serve "$RIMO_MODEL_PATH"'.
SERVER_ENV = {"model_path": "RIMO_MODEL_PATH", "port": "RIMO_PORT", "name": "RIMO_NAME",
              "served_name": "RIMO_SERVED_NAME"}


@dataclass(frozen=True)
class Task:
    index: int
    name: str
    port: int
    server: list[str]  # the server's argv
    overrides: list[str]  # KEY=VALUE, each passed as -S (VALUE in Hydra's grammar)
    server_env: dict[str, str] = field(default_factory=dict)  # added to the server's environment


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
    unknown = sorted(set(value) - allowed, key=str)
    if unknown:
        raise ConfigError(f"{sweep.path}: {where}.{unknown[0]}: unknown key (known: "
                          f"{', '.join(sorted(allowed))})")


def _strings(sweep: SweepFile, where: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        if not where.endswith("args"):
            return [value]
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ConfigError(f"{sweep.path}: {where}: {exc} (the string is split as a shell "
                              f"would; or give a list)") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{sweep.path}: {where}: must be a list of strings")
    return list(value)


def _text(sweep: SweepFile, where: str, value: Any, default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ConfigError(f"{sweep.path}: {where}: must be a string")
    return str(value)


def _check_all_strings(sweep: SweepFile) -> None:
    """No control character anywhere (values.check_strings); params values may hold TAB, LF."""
    for key, value in sweep.data.items():
        check_strings(sweep.path, escaped(key), key)
        if key == "models" and isinstance(value, list):
            for index, model in enumerate(value):
                if not isinstance(model, dict):
                    check_strings(sweep.path, f"models.{index}", model)
                    continue
                for name, item in model.items():
                    check_strings(sweep.path, f"models.{index}.{escaped(name)}", name)
                    check_strings(sweep.path, f"models.{index}.{escaped(name)}", item,
                                  prose=name == "params")
        else:
            check_strings(sweep.path, escaped(key), value, prose=key == "params")


def _overrides(sweep: SweepFile, where: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{sweep.path}: {where}: must map a params key path "
                          f"(predict.openai.max_tokens) to its value")
    for key in value:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
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


def _server_argv(sweep: SweepFile, template: str, custom: bool, where: str,
                 fields: dict[str, Any]) -> list[str]:
    """The template's words with the placeholders filled in: each word is one argv entry (no
    shell splits a value); in a command the sweep file wrote, a filled value must be a plain
    word (values.plain_word), in vLLM's own recipe anything but an option."""
    try:
        words = shlex.split(template)
        used = {name for part in words for _, name, _, _ in Formatter().parse(part)
                if name is not None}
    except ValueError as exc:
        raise ConfigError(f"{sweep.path}: server.command: {exc}") from None
    for name in sorted(used):
        if name not in fields:
            raise ConfigError(f"{sweep.path}: server.command: {{{name}}}: {name!r} is not one "
                              f"of {{model_path}}, {{port}}, {{name}}, {{served_name}}")
    keys = {"model_path": f"{where}.path", "served_name": f"{where}.served_name"}
    for name, key in keys.items():
        if custom and name in used:
            plain_word(sweep.path, key, fields[name], name, SERVER_ENV[name])
    try:
        return [part.format(**fields) for part in words]
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"{sweep.path}: server.command: {exc}") from exc


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


def resolve(sweep: SweepFile, *, repo: Path, rev: str, git_url: str, python: str,
            params_text: str | None = None) -> Plan:
    """The plan of ``sweep`` at commit ``rev`` of ``repo``: every check that can fail before
    anything is submitted fails here, naming the file and the key. ``params_text``: the
    project's params.yaml at ``rev``, which each task's ``-S`` values are tried on (with DVC's
    own code) and the result checked as check-params would; None: tried on their keys alone."""
    path = sweep.path
    unknown = sorted(set(sweep.data) - _TOP, key=str)
    if unknown:
        raise ConfigError(f"{path}: {escaped(unknown[0])}: unknown key (known: "
                          f"{', '.join(sorted(_TOP))})")
    _check_all_strings(sweep)
    server = _section(sweep, "server", _SERVER)
    slurm = _section(sweep, "slurm", _SLURM)
    common = _overrides(sweep, "params", sweep.data.get("params"))
    port = server.get("port", DEFAULT_PORT)
    if not isinstance(port, int) or isinstance(port, bool) or not 1024 <= port <= 65000:
        raise ConfigError(f"{path}: server.port: a port number from 1024 to 65000")
    ready = server.get("ready_timeout_s", DEFAULT_READY_S)
    if not isinstance(ready, int | float) or isinstance(ready, bool) or not 0 < ready < 1e9:
        raise ConfigError(f"{path}: server.ready_timeout_s: a positive number of seconds")
    template = server.get("command") or VLLM_COMMAND
    if not isinstance(template, str):
        raise ConfigError(f"{path}: server.command: a command line (a string)")
    models = sweep.data.get("models")
    if not isinstance(models, list) or not models:
        raise ConfigError(f"{path}: models: a list of models, each with a name")
    tasks, seen = [], set()
    workdir = _text(sweep, "workdir", sweep.data.get("workdir"), DEFAULT_WORKDIR)
    label = "params.yaml" + (f" at {rev[:12]}" if params_text is not None else "")
    for index, model in enumerate(models):
        where = f"models.{index}"
        if not isinstance(model, dict):
            raise ConfigError(f"{path}: {where}: a mapping with name, path, params")
        _known_keys(sweep, where, model, _MODEL)
        name = model.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(f"{path}: {where}.name: {name!r}: an experiment name "
                              f"(letters, digits, . _ -; it names a git ref)")
        if name in seen:
            raise ConfigError(f"{path}: {where}.name: {name} is given twice")
        seen.add(name)
        served = not_option(path, f"{where}.served_name",
                            _text(sweep, f"{where}.served_name", model.get("served_name"), name))
        model_path = not_option(path, f"{where}.path",
                                _text(sweep, f"{where}.path", model.get("path"), name))
        task_port = port + index  # tasks that share a node each get their own port
        fields = {"model_path": model_path, "port": task_port, "name": name,
                  "served_name": served}
        argv = _server_argv(sweep, template, "command" in server and bool(server["command"]),
                            where, fields)
        argv += _strings(sweep, "server.args", server.get("args"))
        argv += _strings(sweep, f"{where}.server_args", model.get("server_args"))
        own = _overrides(sweep, f"{where}.params", model.get("params"))
        # One entry per key: params, then the model's own, replace the sweep's defaults.
        entries = list({e.key: e for e in [
            Entry("(the sweep: each task's server)", "predict.backend", "openai"),
            Entry("server.port", "predict.openai.base_url", f"http://127.0.0.1:{task_port}/v1"),
            Entry(f"{where}.served_name", "predict.openai.model", served),
            # One SQLite cache per node, on its local disk (never a network filesystem).
            Entry("workdir", "predict.openai.cache_dir", f"{workdir}/cache"),
            *(Entry(f"params.{k}", k, v) for k, v in common.items()),
            *(Entry(f"{where}.params.{k}", k, v) for k, v in own.items())]}.values())
        values = round_trip(path, entries, params_text, label)
        if params_text is not None:
            _check_params(path, f"{where} ({name})", values, label)
        env = {SERVER_ENV[k]: str(v) for k, v in fields.items()}
        tasks.append(Task(index, name, task_port, argv, [word(path, e) for e in entries], env))
    max_parallel = slurm.get("max_parallel")
    if max_parallel is not None and (not isinstance(max_parallel, int)
                                     or isinstance(max_parallel, bool) or max_parallel < 1):
        raise ConfigError(f"{path}: slurm.max_parallel: a positive integer (or null)")
    job_name = slurm_word(path, "slurm.job_name",
                          _text(sweep, "slurm.job_name", slurm.get("job_name"), "rimo-sweep"))
    options = _strings(sweep, "slurm.options", slurm.get("options"))
    for option in options:
        if not option.startswith("--"):
            raise ConfigError(f"{path}: slurm.options: {option!r}: one sbatch long "
                              f"option per entry (--partition=gpu)")
    results = Path(_text(sweep, "results", sweep.data.get("results"), "sweep-results"))
    results = results if results.is_absolute() else repo / results
    slurm_word(path, "results", str(results))
    dvc_remote = sweep.data.get("dvc_remote")
    if dvc_remote is not None:
        dvc_remote = not_option(path, "dvc_remote", _text(sweep, "dvc_remote", dvc_remote, ""))
    targets = [not_option(path, f"targets.{i}", t)
               for i, t in enumerate(_strings(sweep, "targets", sweep.data.get("targets")))]
    return Plan(
        sweep_file=str(path), sweep_sha256=sweep.sha256, repo=str(repo), rev=rev,
        git_url=check_url(check_git_remote(f"{path}: git_remote", git_url),
                          f"{path}: git_remote"),
        dvc_remote=dvc_remote or None, results=str(results), workdir=workdir, targets=targets,
        ready_timeout_s=float(ready), job_name=job_name, slurm_options=options,
        max_parallel=max_parallel, setup=_strings(sweep, "setup", sweep.data.get("setup")),
        python=python, tasks=tasks)


def _check_params(path: Path, where: str, values: dict[str, Any], label: str) -> None:
    """The params a task's ``dvc exp run`` writes, as its check-params stage will judge them."""
    from rimo_eval.params.config import parse_params

    try:
        parse_params(values, f"{label} with the -S values of {where}")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
