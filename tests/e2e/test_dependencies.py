"""dvc.yaml's code deps are complete and minimal: each stage depends on every project file its
command imports or reads, and on nothing else.

The import graph is read with ``ast`` (static, transitive), starting from the ``rimo-eval`` entry
point and the stage's own module, with the imports that choose a module by name (the backends' entry
points: import_graph.by_name; the CLI's tools' arguments modules are imported only for the tool
named, never for a stage: tests/unit/test_lazy_imports.py); so a helper added to a
stage without a dep fails here, and so does a dep on code the stage never runs (an edit to it
would rerun the stage for nothing: the paid judge for a KaTeX fix). `python -m
tests.support.import_graph` writes the deps these tests want.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rimo_eval.cli import MODULES, STAGES
from tests.support.import_graph import (
    by_name,
    covered,
    project_imports,
    stage_deps,
    stage_files,
    tracked,
)
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import copy_repo, sh


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


@pytest.mark.parametrize("stage", PIPELINE)
def test_stage_deps_hold_nothing_it_does_not_import(stage: str) -> None:
    files = stage_files(stage)  # its modules, and the data folders they read
    extra = sorted(p.relative_to(REPO_ROOT).as_posix() for p in tracked()
                   if covered(p, stage_deps()[stage]) and p not in files)
    assert not extra, (f"dvc.yaml stage {stage!r} depends on files it never imports or reads: "
                       f"{extra} (python -m tests.support.import_graph writes the deps)")


def test_every_import_by_name_is_in_the_graph() -> None:
    """A module that picks modules by a string (importlib, entry points) is one by_name knows:
    else its imports would be invisible to the two tests above."""
    dynamic = {p.relative_to(REPO_ROOT).as_posix() for p in tracked() if p.suffix == ".py"
               and any(call in p.read_text() for call in ("import_module(", "entry_points(",
                                                            "__import__("))}
    known = {"rimo_eval/cli.py", "rimo_eval/predictors/registry.py",
             # Lists plugin backends' names, imports none of them.
             "rimo_eval/params/config.py",
             # Only with --partial, which the view stage never passes (the module says why).
             "rimo_eval/commands/view/command.py"}
    assert dynamic <= known, sorted(dynamic - known)
    assert set(by_name()) == {"rimo_eval.predictors.registry"}
    assert "rimo_eval.predictors.oracle" in by_name()["rimo_eval.predictors.registry"]


def test_editing_score_code_leaves_the_paid_judge_stage_alone() -> None:
    """The judge reads its statistics and graders from rooms below score (issue 31 §6): an edit
    to score's code must not mark the judge, whose rerun costs API calls, changed."""
    files = project_imports("rimo_eval.cli") | project_imports(stage_modules()["judge"])
    assert not [p for p in files if covered(p, ["rimo_eval/score"])]
    assert not any(covered(REPO_ROOT / "rimo_eval/score/metrics.py", [d])
                   for d in stage_deps()["judge"])


def test_import_graph_sees_helpers() -> None:
    """The walker itself: predict reaches the hashing helper through core and the predictors."""
    files = {p.relative_to(REPO_ROOT).as_posix() for p in project_imports(MODULES["predict"])}
    assert {"rimo_eval/io/hashing.py", "rimo_eval/artifacts/items.py",
            "rimo_eval/predictors/base.py", "rimo_eval/__init__.py"} <= files
    assert not covered(REPO_ROOT / "rimo_eval/io/hashing.py", ["rimo_eval/score"])


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
    helper = repo / "rimo_eval/io/hashing.py"
    helper.write_text(helper.read_text() + "\n# an edit to a shared helper\n")
    status = sh(repo, "dvc", "status", "--json").stdout
    changed = set(yaml.safe_load(status) or {})
    importers = {stage for stage, module in stage_modules().items()
                 if REPO_ROOT / "rimo_eval/io/hashing.py" in
                 project_imports("rimo_eval.cli") | project_imports(module)}
    # Every stage but check-params hashes something (it only validates the params file).
    assert importers == set(PIPELINE) - {"check-params"}
    assert importers <= changed, f"dvc status missed {sorted(importers - changed)}"
    shutil.rmtree(repo / ".dvc" / "cache", ignore_errors=True)


@pytest.mark.slow
def test_editing_rendering_code_leaves_predict_score_and_judge_up_to_date(
        tmp_path: Path, oracle_run: Path) -> None:
    """KaTeX, the Markdown cell, the view's assets and the report's templates are drawn by the
    view and the report alone: an edit to them reruns those two, never the stages whose rerun
    costs model calls or changes a number."""
    repo = copy_repo(oracle_run, tmp_path / "repo")
    assert "Data and pipelines are up to date" in sh(repo, "dvc", "status").stdout
    for rel, comment in [("rimo_eval/render/katex.py", "\n# an edit to KaTeX's handling\n"),
                         ("rimo_eval/render/markdown.py", "\n# an edit to the Markdown cell\n"),
                         ("rimo_eval/commands/view/assets/app.js", "\n// an edit to the view\n"),
                         ("rimo_eval/report/templates/table.html.j2", "\n{# an edit #}\n")]:
        (repo / rel).write_text((repo / rel).read_text() + comment)
    changed = set(yaml.safe_load(sh(repo, "dvc", "status", "--json").stdout) or {})
    assert changed == {"view", "report"}, changed
    shutil.rmtree(repo / ".dvc" / "cache", ignore_errors=True)


def test_dvc_yaml_outs_match_the_artifacts_registry() -> None:
    from rimo_eval.artifacts import paths as A
    from rimo_eval.rimo.tracks import TRACKS

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


def test_the_committed_dvc_lock_records_this_code_and_params() -> None:
    """Every code and params dep of every stage is as dvc.lock records it: a commit that changes
    a stage's code without its run leaves users' `dvc repro` rerunning it and `dvc status`
    saying so (the view's and report's hashes lagged one commit this way). Data deps a clean
    clone lacks ("deleted": nothing pulled) are not this test's."""
    import json

    status = json.loads(sh(REPO_ROOT, "dvc", "status", "--json").stdout or "{}")
    stale = {stage: {dep: change for entry in entries if isinstance(entry, dict)
                     for dep, change in (entry.get("changed deps") or {}).items()
                     if change != "deleted"}
             for stage, entries in status.items()}
    stale = {stage: deps for stage, deps in stale.items() if deps}
    assert not stale, (f"dvc.lock is behind the code or params.yaml: {stale}; run `dvc repro` "
                       "and commit dvc.lock (and the reports it writes) with the change")
