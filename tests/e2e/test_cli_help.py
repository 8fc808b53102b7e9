"""The `rimo-eval` command as a new user meets it, through the installed entry point."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from rimo_eval.cli import STAGES, TOOLS

RIMO_EVAL = str(Path(sys.executable).parent / "rimo-eval")


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RIMO_EVAL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_top_level_help_is_plain_text_and_names_stages_and_tools_apart(tmp_path: Path) -> None:
    proc = run(tmp_path, "--help")
    assert proc.returncode == 0
    out = proc.stdout
    assert "``" not in out and ":func:" not in out  # no RST markup
    stages_part, tools_part = out.split("pipeline stages")[1].split("tools (")
    for name in STAGES:
        assert f"  {name} " in stages_part
    for name in TOOLS:
        assert f"  {name} " in tools_part and f"  {name} " not in stages_part
    assert "dvc repro" in out and "dvc exp run" in out


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_stage_help_says_params_yaml_and_dvc_repro(tmp_path: Path, stage: str) -> None:
    proc = run(tmp_path, stage, "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "Reads params.yaml" in text and "--params FILE" in text
    assert "`dvc repro` (or `dvc exp run`)" in text


def test_version(tmp_path: Path) -> None:
    proc = run(tmp_path, "--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"rimo-eval {version('rimo-eval')} (dvc {version('dvc')}")


@pytest.mark.parametrize("where", ["before", "after"])
def test_params_file_is_read_on_either_side_of_the_command(tmp_path: Path, where: str) -> None:
    (tmp_path / "other.yaml").write_text("fetch: {bogus: 1}\n", encoding="utf-8")
    args = (["--params", "other.yaml", "fetch"] if where == "before"
            else ["fetch", "--params", "other.yaml"])
    proc = run(tmp_path, *args)
    assert proc.returncode == 1
    assert "rimo-eval fetch: error: other.yaml: fetch.bogus: unknown key" in proc.stderr


def test_without_params_the_default_file_is_named(tmp_path: Path) -> None:
    proc = run(tmp_path, "fetch")
    assert proc.returncode == 1
    assert "params.yaml: params file not found" in proc.stderr


def test_sweep_submit_help_describes_the_sweep_file_and_points_to_its_page(
        tmp_path: Path) -> None:
    """Issue 43 §6: every top-level key of docs/sweeps.md's example sweep file is named in
    `sweep submit --help`, which points to that page."""
    import yaml

    from tests.support.paths import REPO_ROOT

    page = (REPO_ROOT / "docs/sweeps.md").read_text(encoding="utf-8")
    example = yaml.safe_load(page.split("```yaml\n# sweep.yaml\n")[1].split("```")[0])
    proc = run(tmp_path, "sweep", "submit", "--help")
    assert proc.returncode == 0
    assert "docs/sweeps.md" in proc.stdout
    described = proc.stdout.split("The sweep file (YAML):")[1]
    for key in example:
        assert f" {key}" in described, key
    assert all(len(line) <= 79 for line in proc.stdout.splitlines())
