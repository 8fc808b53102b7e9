"""The project modules a module imports (by parsing, transitively) and whether dvc.yaml's deps cover
them."""

from __future__ import annotations

import ast
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
