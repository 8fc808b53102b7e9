"""Output paths a user names never lose what rimo-eval did not write (issue 42 §1).

``view --out DIR`` renamed an existing DIR aside and rmtree'd it: a thesis.tex, a link's
target, with ``--out .`` a whole repository and its .git; ``compare --html DIR`` and
``leaderboard --out FILE`` ended in tracebacks. Every refusal here goes through the real CLI
before the tool reads any run (so no run is needed); io/outputs.py's own rules (the marker,
the swap, a killed swap, another tool's folder, a file's mark) are tested on the functions.
tests/e2e/test_output_paths_cli.py writes real runs' outputs twice into the same places.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from rimo_eval.chat.batch.openai import batch_line
from rimo_eval.cli import main
from rimo_eval.errors import ConfigError
from rimo_eval.io.outputs import (
    MARKER,
    claim_folder,
    generator,
    html_ours,
    output_file,
    output_folder,
    owner,
)
from rimo_eval.predictors.batch_files import EXPORT, is_export
from tests.support.file_tree import tree
from tests.support.pipeline_repo import BIN, sh

# (tool arguments before the path, the option): each tool that writes a user-named path.
FOLDER_TOOLS = {"view": ["view", "run-a", "--out"],
                "leaderboard": ["leaderboard", "run-a", "run-b", "--out"]}
FILE_TOOLS = {"compare": ["compare", "run-a", "run-b", "--html"]}


def refused(cwd: Path, args: list[str], *needles: str, process: bool = False) -> None:
    """The CLI's answer in ``cwd``: exit 1 and one line naming the path. ``process``: the
    installed command in a process of its own; else its main() here (the same code, without a
    Python start per case; an exception past it fails the test as a traceback would)."""
    if process:
        proc = sh(cwd, str(BIN / "rimo-eval"), *args, check=False, timeout=120)
        code, err = proc.returncode, proc.stderr
    else:
        here = Path.cwd()
        os.chdir(cwd)
        try:
            with contextlib.redirect_stderr(io.StringIO()) as stderr:
                code = main(args)
        finally:
            os.chdir(here)
        err = stderr.getvalue()
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A user's folder: a thesis folder, a file, a link to the thesis folder, a repository."""
    (tmp_path / "thesis").mkdir()
    (tmp_path / "thesis/thesis.tex").write_text("\\documentclass{article}\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    (tmp_path / "link").symlink_to("thesis")
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src/code.py").write_text("x = 1\n", encoding="utf-8")
    sh(repo, "git", "init", "-q")
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", "mine")
    return tmp_path


@pytest.mark.parametrize("tool", sorted(FOLDER_TOOLS))
def test_a_folder_tool_refuses_every_path_it_did_not_make(home: Path, tool: str) -> None:
    before = tree(home)
    args = FOLDER_TOOLS[tool]
    option = f"{tool} --out"
    refused(home, [*args, "thesis"], f"{option} thesis: holds files rimo-eval did not write "
                                     f"(no {MARKER} in it): name a new or empty folder")
    refused(home, [*args, "link"], f"{option} link: is a symbolic link")
    refused(home, [*args, "notes.txt"], f"{option} notes.txt: is a regular file, not a folder")
    refused(home, [*args, "notes.txt/site"], "notes.txt is not a folder")
    refused(home, [*args, "repo"], f"{option} repo: is a repository's root")
    # `--out .` inside a repository (the probe lost the repo, .git included), and a parent.
    refused(home / "repo", [*args, "."], f"{option} .: is the current folder or holds it",
            process=True)
    for out in ("..", str(home)):
        refused(home / "repo", [*args, out], f"{option} {out}: is the current folder or holds it")
    refused(home / "repo/src", [*args, ".."], "is the current folder or holds it")
    assert tree(home) == before


def test_compare_html_refuses_every_path_it_did_not_write(home: Path) -> None:
    before = tree(home)
    args = FILE_TOOLS["compare"]
    refused(home, [*args, "notes.txt"], "compare --html notes.txt: is a file rimo-eval compare "
                                        "did not write: name a new file, or remove this one",
            process=True)
    refused(home, [*args, "thesis"], "compare --html thesis: is a folder, not a file")
    refused(home, [*args, "thesis/"], "names a folder, not a file")
    refused(home, [*args, "link"], "compare --html link: is a symbolic link")
    refused(home, [*args, "/dev/null"], "is a character device, not a regular file")
    refused(home, [*args, "notes.txt/page.html"], "notes.txt is not a folder")
    assert tree(home) == before


# --- io/outputs.py ------------------------------------------------------------------------


def build(out: Path, files: dict[str, str], tool: str = "view") -> None:
    with output_folder(out, tool, f"{tool} --out") as tmp:
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")


def test_an_own_folder_is_replaced_whole_and_marked(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build(out, {"a.js": "1"})
    assert owner(out) == "view" and (out / "a.js").read_text() == "1"
    (out / "stale.js").write_text("x")  # inside a marked folder: the tool's to replace
    build(out, {"b.js": "2"})
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "b.js"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no build or old folder
    empty = tmp_path / "empty"
    empty.mkdir()
    build(empty, {"c.js": "3"})  # an empty folder holds nothing to lose
    assert owner(empty) == "view"


def test_another_tools_folder_is_refused(tmp_path: Path) -> None:
    build(tmp_path / "lb", {"leaderboard.md": "#"}, tool="leaderboard")
    with pytest.raises(ConfigError, match="holds the output of rimo-eval leaderboard, not of "
                                          "view"):
        build(tmp_path / "lb", {"a.js": "1"})
    assert owner(tmp_path / "lb") == "leaderboard"


def test_a_failed_build_leaves_the_old_output_and_no_build_folder(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build(out, {"a.js": "1"})
    with pytest.raises(RuntimeError), output_folder(out, "view", "view --out") as tmp:
        (tmp / "half.js").write_text("x")
        raise RuntimeError("killed")
    assert (out / "a.js").read_text() == "1" and not (out / "half.js").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_a_killed_swap_is_undone_and_a_killed_build_removed(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build(out, {"a.js": "1"})
    out.rename(tmp_path / ".site.old")  # where a kill between the two renames leaves it
    assert claim_folder(out, "view", "view --out") == out and (out / "a.js").exists()
    left = tmp_path / ".site.abcd1234.tmp"  # a killed run's build folder: marked first
    left.mkdir()
    (left / MARKER).write_text("rimo-eval view\n")
    foreign = tmp_path / ".site.zzzz9999.tmp"  # the same name, not marked: never removed
    foreign.mkdir()
    build(out, {"b.js": "2"})
    assert not left.exists() and foreign.is_dir()


def test_a_backup_name_taken_by_the_user_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build(out, {"a.js": "1"})
    (tmp_path / ".site.old").mkdir()
    (tmp_path / ".site.old/mine.txt").write_text("kept")
    with pytest.raises(ConfigError, match=r"\.site\.old is in the way"):
        build(out, {"b.js": "2"})
    assert (tmp_path / ".site.old/mine.txt").read_text() == "kept"


def test_a_marker_that_is_no_regular_file_is_no_mark(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    os.mkfifo(tmp_path / "mine" / MARKER)  # reading it would hang
    assert owner(tmp_path / "mine") is None
    with pytest.raises(ConfigError, match="holds files rimo-eval did not write"):
        claim_folder(tmp_path / "mine", "view", "view --out")


def test_a_file_output_replaces_only_its_own_or_an_empty_file(tmp_path: Path) -> None:
    page = tmp_path / "cmp.html"
    ours = html_ours("compare")
    for _ in range(2):  # the second run replaces the first one's page
        with output_file(page, "compare", "compare --html", ours) as tmp:
            tmp.write_text(f"<!DOCTYPE html>\n<html><head>{generator('compare')}</head>")
    empty = tmp_path / "empty.html"
    empty.touch()
    with output_file(empty, "compare", "compare --html", ours) as tmp:
        tmp.write_text("x")
    (tmp_path / "other.html").write_text(f"<html>{generator('leaderboard')}</html>")
    with pytest.raises(ConfigError, match="did not write"), \
            output_file(tmp_path / "other.html", "compare", "compare --html", ours):
        pass


def test_an_exported_batch_is_known_again(tmp_path: Path) -> None:
    path = tmp_path / "round.jsonl"
    key = "0" * 64
    path.write_bytes(batch_line(key, {"model": "m", "messages": []}))
    with open(path, "rb") as fh:
        assert is_export(fh)
    with output_file(path, *EXPORT, is_export) as tmp:  # a second export of the round
        tmp.write_bytes(b"")
    for other in ({"custom_id": key, "method": "POST", "url": "/v1/embeddings", "body": {}},
                  {"custom_id": "request-1", "method": "POST", "url": "/v1/chat/completions",
                   "body": {}}):
        path.write_text(json.dumps(other) + "\n")
        with pytest.raises(ConfigError, match="rimo-eval predict did not write"):
            claim_file_of(path)


def claim_file_of(path: Path) -> None:
    with output_file(path, *EXPORT, is_export):
        pass
