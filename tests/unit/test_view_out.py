"""Where `rimo-eval view` writes by default: the view stage's folder for the workspace alone
(the site the report links to), a folder of their own for named runs (issue 29 §4)."""

from __future__ import annotations

from pathlib import Path

from rimo_eval.artifacts.paths import VIEW_DIR
from rimo_eval.cli import build_parser
from rimo_eval.commands.view.command import default_out


def test_the_workspace_alone_goes_to_the_view_stage_folder() -> None:
    assert default_out([]) == default_out(["workspace"]) == VIEW_DIR == Path("reports/view")
    assert build_parser().parse_args(["view"]).out is None  # decided by the runs named


def test_named_runs_never_go_to_the_stage_folder() -> None:
    assert default_out(["model-a", "model-b"]) == Path("reports/views/model-a+model-b")
    assert default_out(["workspace", "main"]) == Path("reports/views/workspace+main")
    # Branch names and revisions stay one folder inside reports/views/.
    for names in (["feature/x", "HEAD~1"], [".."], ["../../etc"], ["a b", "\u00e9"]):
        out = default_out(names)
        assert out.parent == Path("reports/views") and "/" not in out.name, out
        assert out.name not in ("", ".", "..")
    long = default_out([f"experiment-{i:03d}" for i in range(20)])
    assert len(long.name) <= 80 and long != default_out([f"experiment-{i:03d}"
                                                          for i in range(21)])
