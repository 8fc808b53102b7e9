"""The check-params stage (issue 28 §3): a key added the way DVC's own error message suggests,
``dvc exp run -S +predict.limt=3``, fails the experiment. Before, no stage declared the new key,
so DVC ran nothing, reported success, and every later ``rimo-eval`` command failed on the file.
An operational knob still reruns only that cheap stage."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.pipeline_repo import copy_repo, sh

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, oracle_run: Path) -> Path:
    return copy_repo(oracle_run, tmp_path_factory.mktemp("params-check") / "repo")


def ran(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines()
            if line.startswith("Running stage '")]


def test_dvc_lock_records_the_file_once_not_every_value(repo: Path) -> None:
    """The file is a dep, not a params entry: dvc.lock holds one hash for it, not a second copy
    of every value (`dvc exp show` lists each param once either way, from params.yaml)."""
    lock = yaml.safe_load((repo / "dvc.lock").read_text(encoding="utf-8"))["stages"]
    entry = lock["check-params"]
    assert "params" not in entry
    assert "params.yaml" in [d["path"] for d in entry["deps"]]
    assert [o["path"] for o in entry["outs"]] == ["reports/params_check.json"]
    assert "reports/params_check.json" in [d["path"] for d in lock["fetch"]["deps"]]


def test_an_unknown_key_added_with_plus_fails_the_experiment(repo: Path) -> None:
    metrics = (repo / "reports/metrics.json").read_bytes()
    proc = sh(repo, "dvc", "exp", "run", "-S", "+predict.limt=3", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert ran(proc.stdout) == ["check-params"], out
    assert ("rimo-eval check-params: error: params.yaml: predict.limt: unknown key; did you "
            "mean `predict.limit`?") in out
    assert "Traceback" not in out
    assert sh(repo, "dvc", "exp", "list", "--name-only").stdout.strip() == ""
    assert (repo / "reports/metrics.json").read_bytes() == metrics
    # A run of one stage checks the file first too: fetch depends on the check's stamp.
    proc = sh(repo, "dvc", "repro", "score", check=False)
    assert proc.returncode != 0 and ran(proc.stdout) == ["check-params"], proc.stdout
    assert "predict.limt: unknown key" in proc.stdout + proc.stderr
    sh(repo, "git", "checkout", "--", "params.yaml")


def restore(repo: Path, lock: bytes) -> None:
    """params.yaml as committed, dvc.lock as the fixture built it (git does not track it)."""
    sh(repo, "git", "checkout", "--", "params.yaml")
    (repo / "dvc.lock").write_bytes(lock)


def test_a_failed_experiments_key_is_named_as_left_in_the_file(repo: Path) -> None:
    """Issue 43 §2: DVC leaves the failed run's `+predict.limt` in params.yaml, so the next,
    correct run fails on it too; its error says the key is there and not in HEAD's file, and
    the advice works."""
    lock = (repo / "dvc.lock").read_bytes()
    assert sh(repo, "dvc", "exp", "run", "-S", "+predict.limt=3", check=False).returncode != 0
    proc = sh(repo, "dvc", "exp", "run", "-S", "predict.limit=3", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and ran(proc.stdout) == ["check-params"], out
    assert ("predict.limt is in params.yaml now, not in the committed one (HEAD): DVC leaves "
            "every `dvc exp run -S` value in the file, a failed run's too: remove it or "
            "`git checkout params.yaml`") in out
    sh(repo, "git", "checkout", "params.yaml")
    proc = sh(repo, "dvc", "exp", "run", "check-params", "-S", "predict.limit=3")
    assert "every key known, every value valid" in proc.stdout
    restore(repo, lock)


def test_a_misspelt_backend_fails_check_params_with_a_did_you_mean(repo: Path) -> None:
    lock = (repo / "dvc.lock").read_bytes()
    proc = sh(repo, "dvc", "exp", "run", "-S", "predict.backend=opnai", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and ran(proc.stdout) == ["check-params"], out
    assert ("params.yaml: predict.backend: unknown backend 'opnai'; did you mean openai? "
            "known: anthropic, constant, gemini, local, openai, oracle, replay") in out
    restore(repo, lock)


def test_a_number_for_a_text_key_gets_the_quoting_that_works(repo: Path) -> None:
    lock = (repo / "dvc.lock").read_bytes()
    proc = sh(repo, "dvc", "exp", "run", "-S", "predict.constant.answer=1", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and ran(proc.stdout) == ["check-params"], out
    advice = "-S 'predict.constant.answer=\"1\"'"
    assert f"YAML reads 1 as a number: quote it, {advice} on the command line" in out
    sh(repo, "git", "checkout", "params.yaml")
    # The advice, as a shell passes it: DVC writes a string, and the check passes.
    sh(repo, "dvc", "exp", "run", "check-params", "-S", 'predict.constant.answer="1"')
    answer = yaml.safe_load((repo / "params.yaml").read_text())["predict"]["constant"]["answer"]
    assert answer == "1"
    restore(repo, lock)


def test_an_operational_knob_reruns_only_the_check(repo: Path) -> None:
    """After the failure above too: the check runs again, alone, and its stamp is back."""
    before = {p: p.read_bytes() for p in (repo / "reports").glob("*.json")
              if p.name != "params_check.json"}
    proc = sh(repo, "dvc", "exp", "run", "-S", "predict.openai.concurrency=64")
    assert ran(proc.stdout) == ["check-params"], proc.stdout
    assert {p: p.read_bytes() for p in before} == before
    assert (repo / "reports/params_check.json").is_file()
    assert "up to date" in sh(repo, "dvc", "status").stdout
