"""Fuzzing the YAML a person writes (issue 42): params files and sweep files of any Unicode,
control characters, anchors, aliases and structure. Each is either refused with our error
(ConfigError, which the CLI prints as one line, never a traceback) or taken; a sweep taken
gives a script that ``bash -n`` accepts, whose ``#SBATCH`` lines come before any command and
whose only commands are the ones the sweep writes, every sweep value in them quoted."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rimo_eval.commands.sweep.plan import _MODEL, _TOP, read_sweep, resolve
from rimo_eval.commands.sweep.script import plan_path, render
from rimo_eval.errors import ConfigError
from rimo_eval.params.config import load_params
from rimo_eval.params.yaml_file import load_unique
from tests.support.paths import REPO_ROOT

PARAMS_TEXT = (REPO_ROOT / "params.yaml").read_text(encoding="utf-8")
# Any code point, lone surrogates and controls included (text() leaves surrogates out).
ANY_TEXT = st.lists(st.one_of(st.characters(), st.characters(categories=["Cs"]),
                              st.sampled_from("\n\r\x00\x1b\x85\u2028'\"$`;\\,{}[]&*:#%-")),
                    max_size=12).map("".join)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=True, allow_infinity=True), ANY_TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(ANY_TEXT, inner, max_size=3)), max_leaves=8)
# YAML syntax, anchors and aliases, and text between: most of it is not YAML.
FRAGMENTS = st.lists(st.one_of(ANY_TEXT, st.sampled_from([
    "&a ", "*a", "&b ", "*b", "<<: *a", "[", "]", "{", "}", ": ", "- ", "\n", "\n  ", "\n    ",
    "? ", "!!python/object:os.system ", "!!binary ", "'", '"', "%YAML 1.1\n", "---\n", "|\n  ",
    "[*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]"])), max_size=40).map("".join)
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(extra=FRAGMENTS)
def test_any_text_after_the_params_is_refused_or_taken(tmp_path: Path, extra: str) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(PARAMS_TEXT + "\nwild: " + extra, encoding="utf-8", errors="surrogatepass")
    try:
        load_params(path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        str(exc).encode("utf-8")  # printable as it is
        event("refused")
        return
    event("taken")


@FUZZ
@given(text=FRAGMENTS)
def test_any_text_as_a_sweep_file_is_refused_or_taken(tmp_path: Path, text: str) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        plan = resolve(read_sweep(path), repo=tmp_path, rev="a" * 40, git_url="/srv/r.git",
                       python=sys.executable)
    except ConfigError as exc:
        assert str(path) in str(exc)
        event("refused")
        return
    event("taken")
    check_script(render(plan), plan, tmp_path)


NAMES = st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,8}", fullmatch=True), ANY_TEXT)
MODEL = st.fixed_dictionaries({"name": NAMES}, optional={
    "path": st.one_of(ANY_TEXT, st.just("/models/x y")), "served_name": ANY_TEXT,
    "server_args": st.one_of(ANY_TEXT, st.lists(ANY_TEXT, max_size=3)),
    "params": st.dictionaries(st.sampled_from(["predict.limit", "predict.openai.model",
                                               "predict.openai.system_prompt", "judge.model",
                                               "predict.openai.extra_body", "x..y", "-k"]),
                              VALUES, max_size=3),
    **{k: VALUES for k in sorted(_MODEL - {"name", "path", "served_name", "server_args",
                                           "params"})}})
SWEEP = st.fixed_dictionaries({"models": st.lists(MODEL, min_size=1, max_size=3)}, optional={
    "server": st.fixed_dictionaries({}, optional={
        "command": st.one_of(ANY_TEXT, st.just("sh -c 'exec serve {model_path} {served_name}'")),
        "args": st.one_of(ANY_TEXT, st.lists(ANY_TEXT, max_size=2)), "port": VALUES}),
    "slurm": st.fixed_dictionaries({}, optional={
        "job_name": ANY_TEXT, "options": st.lists(ANY_TEXT.map(lambda t: "--" + t), max_size=2),
        "max_parallel": VALUES}),
    "params": st.dictionaries(st.sampled_from(["predict.limit", "predict.openai.seed",
                                               "predict.openai.system_prompt"]), VALUES,
                              max_size=2),
    **{k: st.one_of(ANY_TEXT, VALUES) for k in ("results", "workdir", "dvc_remote", "targets",
                                                "git_remote")},
    "unknown": VALUES})


# Printable text of shell, YAML and Hydra syntax: mostly taken, so the script is checked.
PRINTABLE = st.text(st.one_of(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs",
                                                                                "Zl", "Zp"]),
                              st.sampled_from("'\"$`;\\,{}[]&*:#%!| \t-")), max_size=12)
TAKEN = st.fixed_dictionaries({"models": st.lists(st.fixed_dictionaries(
    {"name": st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,8}", fullmatch=True)}, optional={
        "path": PRINTABLE, "served_name": PRINTABLE,
        "server_args": st.lists(PRINTABLE, max_size=2),
        "params": st.fixed_dictionaries({}, optional={
            "predict.openai.system_prompt": PRINTABLE, "predict.limit": VALUES})}),
    min_size=1, max_size=3, unique_by=lambda m: m["name"])}, optional={
    "server": st.fixed_dictionaries({}, optional={"args": st.lists(PRINTABLE, max_size=2)}),
    "slurm": st.fixed_dictionaries({}, optional={"options": st.lists(
        PRINTABLE.map(lambda t: "--comment=" + t), max_size=2)}),
    "workdir": PRINTABLE, "targets": st.lists(PRINTABLE, max_size=2)})


@FUZZ
@given(sweep=st.one_of(SWEEP, TAKEN), top=st.sampled_from(sorted(_TOP)))
def test_any_sweep_structure_is_refused_or_gives_a_script_of_quoted_data(
        tmp_path: Path, sweep: dict[str, Any], top: str) -> None:
    sweep.pop(top if top != "models" else "unknown", None)
    path = tmp_path / "sweep.yaml"
    path.write_text(as_yaml(sweep), encoding="utf-8")
    try:
        plan = resolve(read_sweep(path), repo=tmp_path / "a$(id)&;`x`", rev="a" * 40,
                       git_url="/srv/r.git", python=sys.executable)
    except ConfigError as exc:
        assert str(exc).startswith(f"{path}: "), exc
        event("refused")
        return
    event("taken")
    check_script(render(plan), plan, tmp_path)


def as_yaml(data: Any) -> str:
    """``data`` as YAML that loads back as exactly ``data``: JSON (which is YAML), every
    character YAML may not hold raw (C1, DEL, line separators, surrogates, U+FFFE/F) escaped as
    one code point; an astral character stays raw (JSON's surrogate pair would load as two
    lone surrogates: YAML's \\u escapes are code points)."""
    return re.sub(r"[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]",
                  lambda m: f"\\u{ord(m.group()):04x}", json.dumps(data, ensure_ascii=False))


def test_as_yaml_loads_back_as_the_data() -> None:
    data = {"k\x85": ["\U0001F600\ud800\x00\x7f\u2028\n", 1.5, None, True]}
    assert load_unique(as_yaml(data), "f.yaml") == data


def check_script(script: str, plan: Any, tmp: Path) -> None:
    script.encode("utf-8")
    assert "\r" not in script and "\x00" not in script
    file = tmp / "sweep.sbatch"
    file.write_text(script, encoding="utf-8")
    proc = subprocess.run(["bash", "-n", str(file)], capture_output=True, text=True)
    assert proc.returncode == 0, (proc.stderr, script)
    lines = script.splitlines()
    first = lines.index("set -euo pipefail")
    assert all(line.startswith("#") for line in lines[:first]), script
    sbatch = [line for line in lines if line.startswith("#SBATCH")]
    assert lines[1:1 + len(sbatch)] == sbatch  # right after the shebang, before any command
    assert lines[first + 1:] == [
        f"cd {shlex.quote(plan.repo)}", *plan.setup,
        f"exec {'rimo-eval' if plan.setup else shlex.quote(plan.python) + ' -m rimo_eval'} "
        f"sweep task {shlex.quote(str(plan_path(plan)))} \"$SLURM_ARRAY_TASK_ID\""]
    assert shlex.split(lines[-1])[-2] == str(plan_path(plan))
