"""view, compare --html and leaderboard --out on two real experiments (issue 42 §1): each tool
writes its output twice into the same place (the second run replaces the first cleanly), and
never touches what it did not write, with the runs there to be written: a user's folder with a
thesis in it, a file, a link to the user's folder, and ``--out .`` in the repository itself
(which the probe lost whole, .git included). The refusals of every path without a run:
tests/unit/test_output_paths.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rimo_eval.io.outputs import owner
from tests.support.file_tree import tree
from tests.support.pipeline_repo import sh
from tests.support.view_runs import copy_runs

pytestmark = pytest.mark.slow
# Each tool, its arguments before the path, and what a run of it writes there.
TOOLS = {"view": (["view", "run-a", "--out"], "index.html"),
         "leaderboard": (["leaderboard", "run-a", "run-b", "--out"], "leaderboard.tex"),
         "compare": (["compare", "run-a", "run-b", "--html"], None)}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, view_runs_base: dict[str, Any]) -> Path:
    root: Path = copy_runs(view_runs_base, tmp_path_factory.mktemp("outputs"))["repo"]
    return root


def run(repo: Path, tool: str, out: str, check: bool = True) -> Any:
    args, _ = TOOLS[tool]
    return sh(repo, "rimo-eval", *args, out, check=check)


@pytest.mark.parametrize("tool", ["view", "leaderboard"])
def test_a_second_run_replaces_the_tools_own_folder(repo: Path, tool: str) -> None:
    out = repo / f"out-{tool}"
    run(repo, tool, out.name)
    first = tree(out)
    assert owner(out) == tool and TOOLS[tool][1] in first
    (out / "stale.txt").write_text("left by hand in the tool's own folder")
    run(repo, tool, out.name)
    assert tree(out) == first  # replaced whole, byte for byte the same output
    assert not [p.name for p in repo.iterdir() if p.name.startswith(f".{out.name}.")]


def test_a_second_compare_replaces_its_own_page(repo: Path) -> None:
    page = repo / "cmp.html"
    run(repo, "compare", page.name)
    first = page.read_bytes()
    assert first.startswith(b"<!DOCTYPE html>")
    run(repo, "compare", page.name)
    assert page.read_bytes() == first


@pytest.fixture
def user(tmp_path: Path) -> Path:
    """The user's things: a thesis folder, a file, a link to the thesis folder."""
    (tmp_path / "thesis").mkdir()
    (tmp_path / "thesis/thesis.tex").write_text("\\documentclass{article}\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    (tmp_path / "link").symlink_to(tmp_path / "thesis")
    return tmp_path


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_nothing_the_tool_did_not_write_is_lost(repo: Path, user: Path, tool: str) -> None:
    before, repo_before = tree(user), tree(repo)
    wanted_file = TOOLS[tool][1] is None
    paths = ["thesis", "link", "notes.txt" if not wanted_file else "thesis/"]
    if wanted_file:
        paths.append("notes.txt")
    for path in paths:
        proc = run(repo, tool, str(user / path), check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert str(user / path) in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    if not wanted_file:
        proc = run(repo, tool, ".", check=False)
        assert proc.returncode == 1 and "is the current folder or holds it" in proc.stderr
    assert tree(user) == before
    assert tree(repo) == repo_before  # the repository, .git and the DVC cache whole

