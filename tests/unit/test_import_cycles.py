"""No import circle in the package (issue 31): the modules of ``rimo_eval`` and what they import
form a graph without cycles. Every import counts, lazy ones inside functions and those under
``if TYPE_CHECKING`` too: a circle hidden that way is still two modules that need each other
(the legacy cache layer and the cache were one)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from tests.support.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "rimo_eval"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # a submodule
    return {m for m in found if m in modules}


def import_graph(root: Path) -> dict[str, set[str]]:
    files = {module_name(p): p for p in root.rglob("*.py")}
    modules = set(files)
    return {name: imports(path, modules) - {name} for name, path in files.items()}


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 100 and graph["rimo_eval.cli"]  # the walk sees the package
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_the_check_sees_a_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "rimo_eval"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from rimo_eval.b import x\n")
    (pkg / "b.py").write_text("def f():\n    import rimo_eval.a\n    from rimo_eval import c\n")
    (pkg / "c.py").write_text("")
    files = {p.stem: p for p in pkg.glob("*.py")}
    modules = {"rimo_eval.a", "rimo_eval.b", "rimo_eval.c"}
    assert imports(files["a"], modules) == {"rimo_eval.b"}
    assert imports(files["b"], modules) == {"rimo_eval.a", "rimo_eval.c"}  # lazy ones too
    graph = {"rimo_eval.a": {"rimo_eval.b"}, "rimo_eval.b": {"rimo_eval.a"}}
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError:
        return
    raise AssertionError("the cycle was not seen")
