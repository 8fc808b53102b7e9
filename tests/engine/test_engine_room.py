"""The chat engine is a room of its own (issue 17 §2): nothing under ``rimo_eval/chat`` imports
the RIMO protocol, the score stage or the judge, directly or through another module; nor the
RIMO params tree (``params/config.py``): a transport is configured by its section, from
``params/chat.py`` (issue 31 §9). It reaches only the rooms it needs (issue 41 §4): io/,
the params it is configured with, the exception types."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.import_graph import project_imports
from tests.support.paths import REPO_ROOT

ENGINE = sorted(p for p in (REPO_ROOT / "rimo_eval/chat").rglob("*.py"))
FORBIDDEN = ("rimo_eval/predictors/", "rimo_eval/score/", "rimo_eval/judge/", "rimo_eval/commands/",
             "rimo_eval/params/config.py")
# What the engine may reach outside chat/: files and hashes, and its own params sections (their
# base, the marks on their fields); no RIMO rule, artifact contract or rendering.
ALLOWED = ("rimo_eval/chat/", "rimo_eval/io/", "rimo_eval/__init__.py", "rimo_eval/errors.py",
           "rimo_eval/params/__init__.py", "rimo_eval/params/section.py",
           "rimo_eval/params/effects.py", "rimo_eval/params/chat.py",
           "rimo_eval/io/atomic.py", "rimo_eval/core/__init__.py")


def _module(path: Path) -> str:
    rel = path.relative_to(REPO_ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def test_the_room_has_its_transports() -> None:
    names = {p.relative_to(REPO_ROOT).as_posix() for p in ENGINE}
    assert {"rimo_eval/chat/session.py", "rimo_eval/chat/transport.py",
            "rimo_eval/chat/openai/transport.py", "rimo_eval/chat/llama/transport.py"} <= names


@pytest.mark.parametrize("path", ENGINE, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_the_engine_imports_nothing_of_rimo(path: Path) -> None:
    reached = {p.relative_to(REPO_ROOT).as_posix() for p in project_imports(_module(path))}
    bad = sorted(p for p in reached if p.startswith(FORBIDDEN) or not p.startswith(ALLOWED))
    assert not bad, f"{_module(path)} reaches {bad}"


def test_the_judge_depends_on_the_engine_not_on_the_rimo_predictors() -> None:
    """An edit to predictors/replay.py (or any predictor) must not rerun the judge."""
    from rimo_eval.cli import MODULES
    from tests.support.import_graph import covered, stage_deps

    deps = stage_deps()["judge"]
    replay = REPO_ROOT / "rimo_eval/predictors/replay.py"
    assert covered(REPO_ROOT / "rimo_eval/chat/session.py", deps) and not covered(replay, deps)
    assert not [d for d in deps if d.startswith(("rimo_eval/predictors", "rimo_eval/score"))]
    reached = project_imports(MODULES["judge"])
    assert not [p for p in reached if "rimo_eval/predictors/" in p.as_posix()]
