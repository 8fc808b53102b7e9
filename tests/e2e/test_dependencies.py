"""dvc.yaml's code deps cover every project file each stage imports, by construction.

The import graph is read with ``ast`` (static, transitive), starting from the ``rimo-eval`` entry
point and the stage's own module, so a helper added to a stage without a dep fails here.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
import yaml

from rimo_eval.cli import MODULES, STAGES
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import copy_repo, sh


def module_file(module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != "rimo_eval":
        return None
    base = REPO_ROOT.joinpath(*parts)
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports(path: Path, module: str) -> set[str]:
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            found.add(mod)
            # ``from pkg import sub`` may name a submodule.
            found.update(f"{mod}.{alias.name}" for alias in node.names)
    return found


def project_imports(module: str) -> set[Path]:
    """Every file of the ``rimo_eval`` package that importing ``module`` executes."""
    seen: set[Path] = set()
    todo = [module]
    while todo:
        mod = todo.pop()
        parts = mod.split(".")
        # Importing a.b.c runs a/__init__.py and a/b/__init__.py first.
        for k in range(1, len(parts) + 1):
            name = ".".join(parts[:k])
            path = module_file(name)
            if path is None or path in seen:
                continue
            seen.add(path)
            todo.extend(_imports(path, name))
    return seen


def covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(REPO_ROOT).as_posix()
    return any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in deps)


def stage_deps() -> dict[str, list[str]]:
    spec = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())
    return {name: [d for d in st.get("deps", []) if isinstance(d, str)]
            for name, st in spec["stages"].items()}


def stage_modules() -> dict[str, str]:
    """Each dvc.yaml stage's module, from its command (`rimo-eval NAME`): a pipeline stage of
    the CLI, or a tool run as a stage (view)."""
    spec = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())
    out = {}
    for name, st in spec["stages"].items():
        program, command = st["cmd"].split()[:2]
        assert program == "rimo-eval", st["cmd"]
        out[name] = MODULES[command]
    return out


PIPELINE = sorted(yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"])


@pytest.mark.parametrize("stage", PIPELINE)
def test_stage_deps_cover_its_imports(stage: str) -> None:
    deps = stage_deps()[stage]
    files = project_imports("rimo_eval.cli") | project_imports(stage_modules()[stage])
    missing = sorted(p.relative_to(REPO_ROOT).as_posix() for p in files if not covered(p, deps))
    assert not missing, f"dvc.yaml stage {stage!r} imports files it does not depend on: {missing}"


def test_import_graph_sees_helpers() -> None:
    """The walker itself: predict reaches the hashing helper through core and the predictors."""
    files = {p.relative_to(REPO_ROOT).as_posix() for p in project_imports(MODULES["predict"])}
    assert {"rimo_eval/core/hashing.py", "rimo_eval/core/items.py", "rimo_eval/predictors/base.py",
            "rimo_eval/__init__.py"} <= files
    assert not covered(REPO_ROOT / "rimo_eval/core/hashing.py", ["rimo_eval/score"])


def test_every_stage_module_is_in_dvc_yaml() -> None:
    # The pipeline's stages, and the view: a tool that dvc.yaml runs as a stage, so each run's
    # own browser is a DVC output (issue 29 §4).
    assert set(stage_deps()) == set(STAGES) | {"view"}
    assert stage_modules() == {**{s: MODULES[s] for s in STAGES}, "view": MODULES["view"]}


@pytest.mark.slow
def test_editing_a_core_helper_marks_every_importing_stage(tmp_path: Path, oracle_run: Path
                                                           ) -> None:
    # Every stage up to date: a copy of the session's full oracle run.
    repo = copy_repo(oracle_run, tmp_path / "repo")
    assert "Data and pipelines are up to date" in sh(repo, "dvc", "status").stdout
    helper = repo / "rimo_eval/core/hashing.py"
    helper.write_text(helper.read_text() + "\n# an edit to a shared helper\n")
    status = sh(repo, "dvc", "status", "--json").stdout
    changed = set(yaml.safe_load(status) or {})
    importers = {stage for stage, module in stage_modules().items()
                 if REPO_ROOT / "rimo_eval/core/hashing.py" in
                 project_imports("rimo_eval.cli") | project_imports(module)}
    # Every stage but check-params hashes something (it only validates the params file).
    assert importers == set(PIPELINE) - {"check-params"}
    assert importers <= changed, f"dvc status missed {sorted(importers - changed)}"
    shutil.rmtree(repo / ".dvc" / "cache", ignore_errors=True)


def test_dvc_yaml_outs_match_the_artifacts_registry() -> None:
    from rimo_eval.core import artifacts as A
    from rimo_eval.core.tracks import TRACKS

    spec = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]

    def paths(stage: str, kind: str) -> set[str]:
        return {next(iter(o)) if isinstance(o, dict) else o for o in spec[stage].get(kind, [])}

    def posix(*ps: Path) -> set[str]:
        return {p.as_posix() for p in ps}

    assert paths("check-params", "outs") == posix(A.PARAMS_CHECK_PATH)
    assert A.PARAMS_CHECK_PATH.as_posix() in paths("fetch", "deps")  # so it runs first
    assert paths("fetch", "outs") == posix(A.RAW_DIR)
    assert paths("validate", "outs") == posix(*(A.items_path(t) for t in TRACKS),
                                              A.VALIDATION_PATH)
    assert paths("predict", "outs") == posix(*(A.predictions_path(t) for t in TRACKS),
                                             A.PREDICT_RUN_PATH)
    # metrics.json is the benchmark's DVC metrics file (`dvc exp show` leads with its headline);
    # the opt-in judge keeps its own, so its numbers never mix with the exact-match ones.
    # model.json is one string, the run's backend and model: the "model" column of the
    # `dvc exp show` view that rimo-eval summary recommends.
    assert {s: spec[s]["metrics"] for s in spec if "metrics" in spec[s]} == {
        "score": [{A.METRICS_PATH.as_posix(): {"cache": False}},
                  {A.MODEL_PATH.as_posix(): {"cache": False}}],
        "judge": [{A.JUDGE_METRICS_PATH.as_posix(): {"cache": False}}]}
    assert paths("score", "outs") == posix(*(A.scores_path(t) for t in TRACKS),
                                           A.BREAKDOWN_PATH, A.PROVENANCE_PATH)
    assert paths("score", "metrics") == posix(A.METRICS_PATH, A.MODEL_PATH)
    assert paths("score", "plots") == posix(*(A.plot_path(t) for t in TRACKS),
                                            *(A.PLOTS_DIR / A.YEAR_PLOT_FILES[t] for t in TRACKS))
    assert paths("judge", "outs") == posix(A.JUDGE_TABLE)
    assert paths("judge", "metrics") == posix(A.JUDGE_METRICS_PATH)
    assert paths("report", "outs") == posix(A.REPORT_IPYNB, A.REPORT_HTML)
    # Cached (no cache: false): `dvc exp apply` / `dvc checkout` restore each run's own site.
    assert spec["view"]["outs"] == [A.VIEW_DIR.as_posix()]
    assert A.NOTEBOOK.as_posix() in paths("report", "deps")
