"""The chat engine is a room of its own (issue 17 §2): nothing under ``stages/chat`` imports
the RIMO protocol, the score stage or the judge, directly or through another module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.test_dependencies import project_imports

ENGINE = sorted(p for p in (REPO_ROOT / "stages/chat").rglob("*.py"))
FORBIDDEN = ("stages/predictors/", "stages/score/", "stages/judge/", "stages/commands/")


def _module(path: Path) -> str:
    rel = path.relative_to(REPO_ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def test_the_room_has_its_transports() -> None:
    names = {p.relative_to(REPO_ROOT).as_posix() for p in ENGINE}
    assert {"stages/chat/session.py", "stages/chat/transport.py",
            "stages/chat/openai/transport.py", "stages/chat/llama/transport.py"} <= names


@pytest.mark.parametrize("path", ENGINE, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_the_engine_imports_nothing_of_rimo(path: Path) -> None:
    reached = {p.relative_to(REPO_ROOT).as_posix() for p in project_imports(_module(path))}
    bad = sorted(p for p in reached if p.startswith(FORBIDDEN))
    assert not bad, f"{_module(path)} reaches {bad}"


def test_the_judge_depends_on_the_engine_not_on_the_rimo_predictors() -> None:
    """An edit to predictors/replay.py (or any predictor) must not rerun the judge."""
    from tests.e2e.test_dependencies import MODULES, covered, stage_deps

    deps = stage_deps()["judge"]
    assert "stages/chat" in deps and not covered(REPO_ROOT / "stages/predictors/replay.py", deps)
    reached = project_imports(MODULES["judge"])
    assert not [p for p in reached if "stages/predictors/" in p.as_posix()]
