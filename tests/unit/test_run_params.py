"""A run's params.yaml read back at its revision (compare, leaderboard, view) refuses a key
given twice, as the pipeline's own reader does: PyYAML kept the last copy without a word."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rimo_eval.errors import DataError
from rimo_eval.run.reader import RunReader
from rimo_eval.run.revision import WORKSPACE, Revision
from tests.support.pipeline_repo import env

TWICE = "predict:\n  limit: 5\n  backend: local\n  limit: 50\n"


def test_a_key_given_twice_in_a_past_runs_params_is_named(tmp_path: Path) -> None:
    for args in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        subprocess.run(args, cwd=tmp_path, env=env(), check=True)
    (tmp_path / "params.yaml").write_text(TWICE, encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, env=env(), check=True)
    subprocess.run(["git", "commit", "-qm", "run"], cwd=tmp_path, env=env(), check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, env=env(), check=True,
                         capture_output=True, text=True).stdout.strip()
    for revision in (Revision("HEAD", "git", sha), Revision(WORKSPACE, WORKSPACE, None)):
        with RunReader(tmp_path) as reader, pytest.raises(DataError) as err:
            files = reader.files(revision)
            files.read_params()
        assert "predict.limit: key given twice (first at line 2)" in str(err.value)
        assert f"params.yaml at {files.where}:4" in str(err.value)
