"""The tests' own layout (issue 31 §7): what test modules share lives in ``tests/support/``.

A test module that imports another one runs (and may collect) the other's module code, hides
a helper where nobody looks for it, and breaks when that module is renamed or split; importing
``conftest.py`` for a helper does the same to pytest's fixture mechanism. So no test module
(``test_*.py``) and no support module imports a test module or a conftest, not even inside a
code string run in a subprocess, and every helper module sits in ``tests/support/``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"
# A dotted module whose last part is a test module or a conftest: ``tests.e2e.test_x``.
_TEST_MODULE = re.compile(r"(^|\.)(test_\w+|conftest)$")
# The same in code kept in strings (run by ``python -c`` or written to a driver script).
_IN_TEXT = re.compile(r"^\s*(from\s+[\w.]*\.(test_\w+|conftest)\s+import|import\s+[\w.]*"
                      r"\.(test_\w+|conftest)\b|from\s+[\w.]+\s+import\s+.*\b(test_\w+|conftest)"
                      r"\b)", re.MULTILINE)


def _python_files(tests: Path) -> list[Path]:
    return sorted(p for p in tests.rglob("*.py") if "__pycache__" not in p.parts)


def imported_test_modules(path: Path) -> list[str]:
    """Every module ``path`` imports (or names in an import kept in a string) that is a test
    module or a conftest."""
    source = path.read_text(encoding="utf-8")
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _TEST_MODULE.search(a.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if _TEST_MODULE.search(module):
                found.append(module)
            found += [f"{module}.{a.name}" for a in node.names
                      if _TEST_MODULE.search(a.name)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [m.group(0).strip() for m in _IN_TEXT.finditer(node.value)]
    return found


def imports_of_test_modules(tests: Path = TESTS) -> dict[str, list[str]]:
    return {p.relative_to(tests).as_posix(): bad for p in _python_files(tests)
            if (bad := imported_test_modules(p))}


def helpers_outside_support(tests: Path = TESTS) -> list[str]:
    """Python files under ``tests/`` that are neither a test module, a conftest, a package's
    ``__init__`` nor in ``tests/support/``."""
    allowed = {"conftest.py", "__init__.py"}
    return [p.relative_to(tests).as_posix() for p in _python_files(tests)
            if not p.name.startswith("test_") and p.name not in allowed
            and "support" not in p.relative_to(tests).parts]


def test_no_module_imports_a_test_module_or_a_conftest() -> None:
    assert imports_of_test_modules() == {}


def test_every_helper_lives_in_tests_support() -> None:
    assert helpers_outside_support() == []


def test_the_checks_see_every_form_of_import(tmp_path: Path) -> None:
    """The checks must be able to fail: each form of a forbidden import, and a flat helper."""
    t = "test_"  # spelled apart, so that this module's own strings hold no such import
    forms = {
        "test_a.py": f"from tests.e2e.{t}b import x\n",
        "test_c.py": f"import tests.unit.{t}d\n",
        "test_e.py": f"from tests.e2e import {t}f\n",
        "test_g.py": f"from tests.{'conftest'} import REPO_ROOT\n",
        "test_h.py": f"def f():\n    from .{t}i import y\n",
        "test_j.py": f'CODE = """\nimport sys\nfrom tests.unit.{t}k import payload\n"""\n',
        "test_ok.py": "from tests.support.paths import REPO_ROOT\nCODE = 'test_x = 1'\n",
        "helper.py": "",
    }
    for name, text in forms.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert sorted(imports_of_test_modules(tmp_path)) == [
        "test_a.py", "test_c.py", "test_e.py", "test_g.py", "test_h.py", "test_j.py"]
    assert helpers_outside_support(tmp_path) == ["helper.py"]
