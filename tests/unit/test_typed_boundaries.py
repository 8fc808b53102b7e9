"""Issue 41 items 5 and 7, held by reading the package's source: params cross every boundary
typed (no signature takes a params section *or* a plain mapping, and the bridges that made such
unions work, ``coerce`` and ``key_of``, are gone), and no module passes 400 lines.

Another revision's params.yaml stays plain data on purpose (typing it would refuse older
files); it lives in ``Run.params`` and is read through ``Run.section``, which is not a union.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "rimo_eval"
TYPED = ("Params", "Section")  # the names of the typed params models end in one of these
PLAIN = ("Mapping", "dict", "Dict", "MutableMapping")


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _members(node: ast.expr) -> list[ast.expr]:
    """The members of an ``A | B | C`` annotation (one member when it is not a union)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _members(node.left) + _members(node.right)
    return [node]


def _name(node: ast.expr) -> str:
    base = node.value if isinstance(node, ast.Subscript) else node
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else ""


def mixed_unions(tree: ast.Module) -> list[str]:
    """Each annotation that joins a typed params model with a plain mapping."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                *filter(None, (node.args.vararg, node.args.kwarg))]
        notes = [(a.arg, a.annotation) for a in args] + [("return", node.returns)]
        for what, note in notes:
            if note is None:
                continue
            names = [_name(m) for m in _members(note)]
            if any(n.endswith(TYPED) for n in names) and any(n in PLAIN for n in names):
                found.append(f"line {node.lineno}: {node.name}({what}: {ast.unparse(note)})")
    return found


def test_the_checker_sees_a_mixed_union() -> None:
    tree = ast.parse("def f(cfg: ScoreParams | Mapping[str, Any] | None) -> None: ...\n"
                     "def g(cfg: ScoreParams | None) -> Section | dict[str, Any]: ...\n"
                     "def h(data: Mapping[str, Any] | None) -> dict[str, Any]: ...\n")
    assert mixed_unions(tree) == [
        "line 1: f(cfg: ScoreParams | Mapping[str, Any] | None)",
        "line 2: g(return: Section | dict[str, Any])"]


def test_no_signature_takes_params_or_a_mapping() -> None:
    found = {path.relative_to(REPO_ROOT).as_posix(): bad for path, tree in _sources()
             if (bad := mixed_unions(tree))}
    assert found == {}


def test_the_bridges_are_gone() -> None:
    defined = [f"{path.relative_to(REPO_ROOT)}: {node.name}" for path, tree in _sources()
               for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef) and node.name in ("coerce", "key_of")]
    assert defined == []


def test_no_module_over_400_lines() -> None:
    long = {path.relative_to(REPO_ROOT).as_posix(): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
