"""Input paths in params.yaml that are not regular files (issue 42 §5): a FIFO, /dev/zero or a
link to one passed check-params, then ``dvc exp run`` hung hashing it; a folder named a.jsonl
ended in an IsADirectoryError traceback. check-params refuses each at once, naming the key
path. Every command runs under a timeout, so a hang fails the test instead of blocking it."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import BIN, sh

PARAMS = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
HANG = 60  # seconds: the refusal takes about one Python start; a hang is killed here


def check_params(root: Path, key: str, value: str) -> tuple[int, str]:
    """``rimo-eval check-params`` in ``root`` with ``key`` (dotted) set to ``value``."""
    data: dict[str, Any] = copy.deepcopy(PARAMS)
    *parents, last = key.split(".")
    section = data
    for name in parents:
        section = section.setdefault(name, {})
    section[last] = value
    (root / "exp.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    proc = sh(root, str(BIN / "rimo-eval"), "--params", "exp.yaml", "check-params",
              check=False, timeout=HANG)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr


@pytest.fixture
def root(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "pipe.jsonl")
    (tmp_path / "link.jsonl").symlink_to("pipe.jsonl")
    (tmp_path / "a.jsonl").mkdir()
    return tmp_path


REPLAY = "predict.replay.path"


@pytest.mark.parametrize(("value", "what"), [
    ("pipe.jsonl", "pipe.jsonl is not a regular file (a FIFO)"),
    ("/dev/zero", "/dev/zero is not a regular file (a character device)"),
    ("link.jsonl", "link.jsonl is not a regular file (a symbolic link to a FIFO)"),
    ("a.jsonl", "a.jsonl is a folder, not a regular file"),
])
def test_check_params_refuses_a_replay_path_that_is_no_file(root: Path, value: str,
                                                            what: str) -> None:
    code, err = check_params(root, REPLAY, value)
    assert code == 1
    assert err.startswith(f"rimo-eval check-params: error: exp.yaml: {REPLAY}: {what}"), err
    assert not (root / "reports/params_check.json").exists()


def test_a_replay_folder_is_checked_inside(root: Path) -> None:
    """A folder of replay files is allowed; DVC hashes all of it and replay reads its *.jsonl
    and *.csv: a FIFO anywhere in it, or a sub-folder x.jsonl, is refused by name."""
    runs = root / "runs"
    (runs / "deeper").mkdir(parents=True)
    (runs / "model_a.jsonl").write_text("", encoding="utf-8")
    assert check_params(root, REPLAY, "runs")[0] == 0
    os.mkfifo(runs / "deeper/notes.txt")
    code, err = check_params(root, REPLAY, "runs")
    assert code == 1 and f"{REPLAY}: runs/deeper/notes.txt is not a regular file (a FIFO)" in err
    (runs / "deeper/notes.txt").unlink()
    (runs / "x.jsonl").mkdir()
    code, err = check_params(root, REPLAY, "runs")
    assert code == 1 and f"{REPLAY}: runs/x.jsonl is a folder, not a regular file" in err


@pytest.mark.parametrize("key", ["validate.errata", "predict.local.model_path"])
def test_every_input_file_key_gets_the_same_check(root: Path, key: str) -> None:
    for value, what in (("pipe.jsonl", "is not a regular file (a FIFO)"),
                        ("/dev/zero", "is not a regular file (a character device)"),
                        ("a.jsonl", "is a folder, not a regular file")):
        code, err = check_params(root, key, value)
        assert code == 1 and f"exp.yaml: {key}: {value} {what}" in err, err


def test_a_missing_path_is_left_to_the_stage_and_a_file_passes(root: Path) -> None:
    """A replay file made later (a sweep writes it, a fixture commits it) is not refused here:
    the stage names a missing file itself. A broken link is refused: it can never be read."""
    (root / "answers.jsonl").write_text("{}\n", encoding="utf-8")
    assert check_params(root, REPLAY, "answers.jsonl")[0] == 0
    assert check_params(root, REPLAY, "not-yet.jsonl")[0] == 0
    (root / "dangling.jsonl").symlink_to("gone.jsonl")
    code, err = check_params(root, REPLAY, "dangling.jsonl")
    assert code == 1 and "dangling.jsonl is a broken symbolic link (to gone.jsonl)" in err
