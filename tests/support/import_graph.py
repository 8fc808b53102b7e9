"""The project modules a module imports (by parsing, transitively), whether dvc.yaml's deps cover
them, and the smallest deps that do (what dvc.yaml lists)."""

from __future__ import annotations

import ast
import subprocess
import tomllib
from functools import cache
from pathlib import Path

import yaml

from tests.support.paths import REPO_ROOT


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


@cache
def by_name() -> dict[str, frozenset[str]]:
    """Imports that choose a module by name, which no import statement shows, as imports of the
    module that makes them: the predictor registry loads the backends of the
    ``rimo_eval.predictors`` entry-point group, the built-in ones declared in pyproject.toml.
    (``cli.MODULES`` names the module of the command that runs: the walk starts from it. The
    CLI imports a tool's ``arguments`` module (``cli.ARGUMENTS``) only when the command line
    names that tool, never for a stage's: tests/unit/test_lazy_imports.py holds that, so no
    stage depends on them.) test_dependencies.py fails on a module that imports by name and is
    not here."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    backends = {v.split(":")[0] for v in project["entry-points"]["rimo_eval.predictors"].values()}
    return {"rimo_eval.predictors.registry": frozenset(backends)}


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
            todo.extend(by_name().get(name, ()))
    return seen


def covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(REPO_ROOT).as_posix()
    return any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in deps)


def stage_deps() -> dict[str, list[str]]:
    spec = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())
    return {name: [d for d in st.get("deps", []) if isinstance(d, str)]
            for name, st in spec["stages"].items()}


def tracked(folder: str = "rimo_eval") -> list[Path]:
    """The files git tracks under ``folder`` (what a clone, and DVC's hash of a folder dep, has)."""
    out = subprocess.run(["git", "ls-files", folder], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=True).stdout
    return [REPO_ROOT / line for line in out.splitlines()]


@cache
def _strings(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def reads(data: Path, modules: set[Path]) -> bool:
    """Whether one of ``modules`` reads the data file ``data`` (a prompt, a schema, a view asset,
    a template): it names a data folder (no ``__init__.py``) above the file that sits beside the
    module or above it (``Path(__file__).parent / "assets"``, ``resources.files("rimo_eval") /
    "prompts"``, ``PackageLoader("rimo_eval.report", "templates")``)."""
    package = REPO_ROOT / "rimo_eval"
    folders = [f for f in data.parents
               if package in f.parents and not (f / "__init__.py").exists()]
    return any(f.name in _strings(module) and f.parent in (module.parent, *module.parents)
               for module in modules for f in folders)


def needed(modules: set[Path]) -> set[Path]:
    """The project files importing ``modules`` needs: those modules and the data they read."""
    return modules | {p for p in tracked() if p.suffix != ".py" and reads(p, modules)}


def smallest_deps(files: set[Path]) -> list[str]:
    """``files`` as dvc.yaml lists them: a folder when every file git tracks in it is needed,
    else each file."""
    tree = tracked()
    out: set[str] = set()
    for path in files:
        dep = path
        for folder in path.parents:
            if folder == REPO_ROOT / "rimo_eval" or REPO_ROOT not in folder.parents:
                break
            if all(p in files for p in tree if folder in p.parents):
                dep = folder
        out.add(dep.relative_to(REPO_ROOT).as_posix())
    return sorted(out)


# ---- dvc.yaml's code deps, written from the graph: python -m tests.support.import_graph

ROOMS = {  # the comment above each group of a stage's code deps, by the folder under rimo_eval/
    "": "the CLI (a tool's arguments module is imported only when that tool runs)",
    "errors.py": "the exception types",
    "core": "core/: modules that other work moves next (params, io, artifacts)",
    "params": "params/: the typed sections",
    "io": "io/: files, hashes, git",
    "rimo": "rimo/: the benchmark's rules",
    "artifacts": "artifacts/: the contracts between stages",
    "render": "render/: KaTeX and Markdown",
    "chat": "chat/: the engine",
    "predictors": "predictors/: the protocol and every backend (entry points in pyproject.toml)",
    "prompts": "prompts/: the templates",
    "schemas": "schemas/: the JSON schemas",
}
MARK = "#: "  # a generated comment line, replaced with the deps on the next run


def stage_files(stage: str) -> set[Path]:
    """Every project file the stage's command imports or reads."""
    from rimo_eval.cli import MODULES

    spec = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())
    command = spec["stages"][stage]["cmd"].split()[1]
    return needed(project_imports("rimo_eval.cli") | project_imports(MODULES[command]))


def _stage_module_file(stage: str) -> str:
    from rimo_eval.cli import MODULES

    spec = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())
    path = module_file(MODULES[spec["stages"][stage]["cmd"].split()[1]])
    assert path is not None
    return path.relative_to(REPO_ROOT).as_posix()


def _room(dep: str) -> str:
    rest = dep.removeprefix("rimo_eval/")
    if rest in ("__init__.py", "cli.py") or (rest.startswith("commands/") and (
            "arguments" in rest or rest.endswith("__init__.py"))):
        return ""
    return rest.split("/")[0]


def deps_block(stage: str, indent: str = "      ") -> list[str]:
    deps = smallest_deps(stage_files(stage))
    order = list(ROOMS)
    groups: dict[str, list[str]] = {}
    for dep in deps:
        groups.setdefault(_room(dep), []).append(dep)
    lines = []
    own = _room(_stage_module_file(stage))
    for room in sorted(groups, key=lambda r: (order.index(r) if r in order else len(order), r)):
        note = ROOMS.get(room, f"{room}/")
        if room == own:
            note = "the stage's own code"
        elif room == "chat" and len(groups[room]) == 2:  # __init__.py and reply_flags.py
            note = "chat/reply_flags.py: the flags the engine sets on a reply, which score counts"
        lines.append(f"{indent}{MARK}{note}")
        lines += [f"{indent}- {d}" for d in groups[room]]
    return lines


def write_dvc_yaml() -> None:
    """Replace each stage's ``rimo_eval/`` deps (and the generated comments) with the graph's."""
    path = REPO_ROOT / "dvc.yaml"
    out: list[str] = []
    stage = None
    in_deps = False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if line.startswith("  ") and not line.startswith("   ") and stripped.endswith(":"):
            stage = stripped[:-1]
        if in_deps and line and not line.startswith("      "):
            out += deps_block(stage or "")
            in_deps = False
        if stripped == "deps:":
            in_deps = True
        elif in_deps and (stripped.startswith(MARK.strip()) or stripped.startswith("- rimo_eval/")):
            continue
        out.append(line)
    path.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    write_dvc_yaml()
