"""dvc.yaml lists predict's params by key (issue 17 §7): an operational knob such as
``predict.openai.concurrency`` reruns nothing, while every key that changes the predictions is
declared by predict and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rimo_eval.params.config import PREDICT_OUTPUT_KEYS
from tests.support.params_declared import covered, declared, dvc_stages
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import copy_repo, sh

OPERATIONAL = ("predict.allow_errors", "predict.openai.concurrency", "predict.openai.timeout_s",
               "predict.openai.max_retries", "predict.openai.cache_dir",
               "predict.openai.breaker_window", "predict.openai.stall_warning_s",
               "predict.local.n_threads", "predict.local.cache_dir")


def _leaf(params: dict, path: str) -> object:
    value: object = params
    for part in path.split("."):
        assert isinstance(value, dict) and part in value, f"{path} is not in params.yaml"
        value = value[part]
    return value


def test_predict_and_report_declare_exactly_the_output_keys() -> None:
    stages = dvc_stages()
    assert declared(stages["predict"]) == list(PREDICT_OUTPUT_KEYS)
    report = [k for k in declared(stages["report"]) if k.startswith("predict")]
    assert report == [*PREDICT_OUTPUT_KEYS, *(f"predict.{b}.price_per_mtok"
                                              for b in ("openai", "anthropic", "gemini"))]
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    for key in PREDICT_OUTPUT_KEYS:  # DVC refuses a declared key the file lacks
        _leaf(params, key)
    for key in OPERATIONAL:
        _leaf(params, key)
        assert not any(covered(key, declared(s)) for s in stages.values()), key


@pytest.mark.slow
def test_an_operational_knob_leaves_every_stage_but_the_check_up_to_date(
        tmp_path: Path, oracle_run: Path) -> None:
    # Every stage up to date: a copy of the session's full oracle run.
    root = copy_repo(oracle_run, tmp_path / "project")
    assert "up to date" in sh(root, "dvc", "status").stdout
    params_file = root / "params.yaml"
    params = yaml.safe_load(params_file.read_text(encoding="utf-8"))
    params["predict"]["openai"]["concurrency"] = 64
    params["predict"]["openai"]["timeout_s"] = 30
    params_file.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    # Only check-params, which validates the whole file (its stamp does not change).
    assert set(json.loads(sh(root, "dvc", "status", "--json").stdout)) == {"check-params"}
    # A key that changes the predictions still reruns predict and report.
    params["predict"]["openai"]["temperature"] = 0.5
    params_file.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    status = sh(root, "dvc", "status").stdout
    assert "predict:" in status and "report:" in status and "predict.openai.temperature" in status


@pytest.mark.parametrize("backend", ["openai", "local", "anthropic", "gemini"])
def test_the_declared_keys_are_the_fingerprinted_ones(backend: str) -> None:
    """What dvc.yaml reruns predict for is what the predictions' fingerprint holds (model
    files aside: local's model_path is declared, its sha256 is fingerprinted)."""
    from rimo_eval.predictors.chat_predictor import OPERATIONAL_KEYS
    from rimo_eval.predictors.registry import predictor_class

    cls = predictor_class(backend)
    fingerprinted = {f"predict.{backend}.{k}" for k in cls.params_model.model_fields
                     if k not in OPERATIONAL_KEYS and k != "n"}
    declared_keys = {k for k in PREDICT_OUTPUT_KEYS if k.startswith(f"predict.{backend}.")}
    extra = {"predict.local.model_path"} if backend == "local" else set()
    assert declared_keys == fingerprinted | extra
