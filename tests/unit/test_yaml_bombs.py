"""YAML alias bombs (issue 42 §4): a "billion laughs" in params.yaml or a sweep file is refused
by the loader, naming the file and line, in time linear in the file; before, check-params
walked 10^9 copies for minutes, and a 487-byte bomb as a sweep ``-S`` value reached 6.2 GB.

(DVC itself expands params.yaml when it parses dvc.yaml, before any stage runs: see
benchmarks/README.md, "YAML alias bombs"; these tests run our commands directly.)
"""

from __future__ import annotations

import resource
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from rimo_eval.params.yaml_file import ALIAS_NODES_MAX, DEPTH_MAX, load_unique
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import BIN, env

TIMEOUT_S = 60  # the bomb took minutes (killed at 180 s at nine levels): seconds now


def bomb(levels: int, indent: str = "", width: int = 10) -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the one before: width**levels
    strings once expanded, a few hundred bytes written."""
    lines = [f'{indent}l0: &a0 [{", ".join(["lol"] * width)}]']
    lines += [f"{indent}l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]"
              for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def limited(gib: int) -> None:
    """The child's address space: a bomb that expands fails, instead of swapping the host."""
    resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))


def test_check_params_refuses_a_bomb_under_an_unknown_key_in_seconds(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text((REPO_ROOT / "params.yaml").read_text(encoding="utf-8")
                    + "not_a_key:\n" + bomb(9, "  "), encoding="utf-8")
    proc = subprocess.run([str(BIN / "rimo-eval"), "--params", str(path), "check-params"],
                          cwd=tmp_path, env=env(), capture_output=True, text=True,
                          timeout=TIMEOUT_S, preexec_fn=lambda: limited(4))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"rimo-eval check-params: error: {path}: invalid YAML: the "
                                  f"aliases up to *a"), proc.stderr
    assert "nodes (a YAML alias bomb?)" in proc.stderr and f'in "{path}", line ' in proc.stderr


def test_make_repro_names_a_bomb_before_dvc_walks_it(tmp_path: Path) -> None:
    """DVC expands params.yaml's aliases before any stage runs (it hangs on a deep bomb), so
    ``make repro`` runs ``rimo-eval check-params`` first: its recipe's first command, as make
    prints it (``-n``: nothing run; ``-o setup``: the venv is not rebuilt), fails on a bomb in
    seconds and so stops make before ``dvc repro``."""
    # Under `make test` this make is a sub-make: no "Entering directory" lines, and none of
    # the outer make's flags.
    outer = {k: v for k, v in env().items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    dry = subprocess.run(["make", "--no-print-directory", "-n", "-o", "setup", "repro"],
                         cwd=REPO_ROOT, env=outer, capture_output=True, text=True,
                         timeout=TIMEOUT_S, check=True)
    recipe = [line for line in dry.stdout.splitlines() if line.strip()]
    assert recipe[0] == "rimo-eval check-params", recipe
    assert recipe.index("dvc repro") > 0, recipe
    (tmp_path / "params.yaml").write_text(
        (REPO_ROOT / "params.yaml").read_text(encoding="utf-8") + "not_a_key:\n"
        + bomb(9, "  "), encoding="utf-8")
    proc = subprocess.run(["sh", "-c", recipe[0]], cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=TIMEOUT_S,
                          preexec_fn=lambda: limited(4))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "params.yaml: invalid YAML: the aliases up to *a" in proc.stderr, proc.stderr


def test_a_sweep_params_value_that_is_a_bomb_is_refused_in_seconds(tmp_path: Path) -> None:
    """The sweep file of the issue: the bomb as a model's -S value."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=work, check=True, env=env())
    shutil.copy(REPO_ROOT / "params.yaml", work / "params.yaml")
    subprocess.run(["git", "add", "-A"], cwd=work, check=True, env=env())
    subprocess.run(["git", "commit", "-qm", "x"], cwd=work, check=True, env=env())
    (work / "sweep.yaml").write_text(
        "git_remote: /srv/none.git\nmodels:\n- name: m-a\n  params:\n"
        "    predict.openai.extra_body:\n" + bomb(9, "      "), encoding="utf-8")
    proc = subprocess.run([str(BIN / "rimo-eval"), "sweep", "submit", "sweep.yaml",
                           "--dry-run"], cwd=work, env=env(), capture_output=True, text=True,
                          timeout=TIMEOUT_S, preexec_fn=lambda: limited(4))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("rimo-eval sweep: error: sweep.yaml: not a YAML sweep file: "
                                  "the aliases up to *a"), proc.stderr
    assert 'in "sweep.yaml", line ' in proc.stderr


def test_aliases_within_the_budget_load_as_before() -> None:
    """A budget, not a ban: shared sections and merge keys are what anchors are for."""
    text = "base: &b {x: 1, y: [1, 2]}\none: *b\ntwo: {<<: *b, x: 2}\n"
    assert load_unique(text, "f.yaml") == {"base": {"x": 1, "y": [1, 2]},
                                           "one": {"x": 1, "y": [1, 2]},
                                           "two": {"x": 2, "y": [1, 2]}}
    # Right at the budget: ALIAS_NODES_MAX nodes added by aliases of a flat list.
    size = 1000  # the list node and its items: 1000 nodes, aliased ALIAS_NODES_MAX/1000 times
    items = ", ".join(["0"] * (size - 1))
    times = ALIAS_NODES_MAX // size
    at = f"a: &a [{items}]\nb: [{', '.join(['*a'] * times)}]\n"
    assert len(load_unique(at, "f.yaml")["b"]) == times
    over = f"a: &a [{items}]\nb: [{', '.join(['*a'] * (times + 1))}]\n"
    with pytest.raises(yaml.YAMLError, match=r"expand the document by more than"):
        load_unique(over, "f.yaml")


@pytest.mark.parametrize(("text", "problem"), [
    ("a: &a [1, *a]\n", "the alias *a is inside its own anchor"),
    ("a: &a {k: *a}\n", "the alias *a is inside its own anchor"),
    ("[" * (DEPTH_MAX + 1) + "]" * (DEPTH_MAX + 1), f"nested more than {DEPTH_MAX} levels"),
    ("k:\n" + "".join(f"{'  ' * (i + 1)}k{i}:\n" for i in range(DEPTH_MAX + 1)),
     f"nested more than {DEPTH_MAX} levels")])
def test_a_cycle_or_a_nesting_no_walker_ends_is_refused(text: str, problem: str) -> None:
    """Before: a structure that holds itself loaded, and every walker recursed until
    RecursionError (a traceback); so did nesting a thousand deep."""
    with pytest.raises(yaml.YAMLError, match=r"in \"f\.yaml\", line \d+") as err:
        load_unique(text, "f.yaml")
    assert problem in str(err.value)
