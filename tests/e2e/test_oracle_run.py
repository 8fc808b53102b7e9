"""The session's shared oracle run, and the copies that modules change: a copy must be a repo
of its own (nothing linked back), with DVC and git both seeing it as clean as the original."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.pipeline_repo import copy_repo, sh

pytestmark = pytest.mark.slow


def files(root: Path) -> list[Path]:
    return [Path(d) / n for d, _, names in os.walk(root) for n in names]


def test_a_copy_shares_no_file_and_is_clean(oracle_run: Path, tmp_path: Path) -> None:
    copy = copy_repo(oracle_run, tmp_path / "copy")
    originals = {(s.st_dev, s.st_ino) for s in map(os.lstat, files(oracle_run))}
    copied = files(copy)
    assert len(copied) > 100
    for path in copied:
        st = os.lstat(path)
        assert (st.st_dev, st.st_ino) not in originals, path  # no hard link into the original
        if path.is_symlink():
            assert not os.readlink(path).startswith(str(oracle_run)), path
    assert not (copy / ".dvc/tmp").exists()
    assert json.loads(sh(copy, "dvc", "status", "--json").stdout) == {}
    sh(copy, "git", "status")  # a working git repo (its index names the copy's files)


def test_changing_a_copy_leaves_the_original_alone(oracle_run: Path, tmp_path: Path) -> None:
    copy = copy_repo(oracle_run, tmp_path / "copy")
    changed = ("reports/metrics.json", "data/items/rimo_n.parquet")
    before = {rel: (oracle_run / rel).read_bytes() for rel in changed}
    for rel in changed:
        (copy / rel).write_bytes(b"torn")
    sh(copy, "dvc", "commit", "-f", "-q")  # into the copy's cache: the original's is apart
    assert {rel: (oracle_run / rel).read_bytes() for rel in changed} == before
    assert json.loads(sh(copy, "dvc", "status", "--json").stdout) == {}
