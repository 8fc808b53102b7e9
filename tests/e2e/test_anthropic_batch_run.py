"""The predict and score stages (no dvc) over a sample of the real, validated RIMO items with
``predict.backend: anthropic``, online and in Message Batches against the fake Message Batches
API in front of one fake model: the same predictions and scores byte for byte and the same
metrics, but the cost, which is the batch price (``batch.discount`` x the online one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rimo_eval.params.config import parse_params
from rimo_eval.predict import predict as predict_stage
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.stage import score
from rimo_eval.validate.stage import run as validate_run
from tests.support.anthropic_batch import KEY_ENV, config
from tests.support.factories import params as project_params
from tests.support.factories import predict_section
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_anthropic_batch import FakeMessageBatches
from tests.support.fake_model import fake_model
from tests.support.fake_provider import Record, Reply
from tests.support.paths import REPO_ROOT

PRICE = {"input": 3.0, "output": 15.0}


def test_predict_and_score_in_message_batches_equal_the_online_run(
        raw_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-ant-test")
    items_dir = tmp_path / "items"
    validate_run(project_params(validate={"errata": str(REPO_ROOT / "data" / "errata.yaml")}),
                 raw_dir=raw_dir, items_dir=items_dir, report_path=tmp_path / "v.json")
    replies = fake_model(items_dir)  # a fixed model: right on some items, wrong on others
    model = FakeAnthropic()

    def respond(record: Record) -> Reply | None:
        text = replies.get(record.prompt)
        return None if text is None else model.answer(record, text)

    model.responder = respond
    fake = FakeMessageBatches(model=model)
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    metrics: dict[str, dict[str, Any]] = {}
    with model:
        fake.start()
        try:
            for name, batch in (("online", False), ("batch", True)):
                out = tmp_path / name
                cfg = {**config(fake, out / "cache", batch=batch), "price_per_mtok": PRICE}
                predict_cfg = {"backend": "anthropic", "limit": 30, "anthropic": cfg}
                predict_stage(predict_section(predict_cfg), items_dir, out / "preds",
                              out / "run.json")
                whole = parse_params({**params, "predict": {**params["predict"], **predict_cfg}})
                score(whole.score, items_dir, out / "preds", out / "scores",
                      out / "metrics.json", out / "plots", whole)
                metrics[name] = json.loads((out / "metrics.json").read_text())
                metrics[name].pop("provenance")  # the hash of a file naming these tmp paths
        finally:
            fake.stop()
    assert fake.violations == [] and set(fake.answered_ok().values()) == {1}
    assert len([e for e in fake.log if e["event"] == "create"]) > 1  # RIMO-P's rounds
    for track in (TRACK_N, TRACK_P):
        online, batched = metrics["online"][track]["usage"], metrics["batch"][track]["usage"]
        assert batched.pop("cost_usd") == pytest.approx(0.5 * online.pop("cost_usd"), abs=1e-6)
        assert batched.pop("cost_batch_discount") == 0.5
    assert metrics["batch"] == metrics["online"]
    assert 0 < metrics["online"][TRACK_N]["accuracy"] < 1
    for path in ("preds/rimo_n.parquet", "preds/rimo_p.parquet", "scores/rimo_n.parquet",
                 "scores/rimo_p.parquet"):
        assert (tmp_path / "batch" / path).read_bytes() == (tmp_path / "online" / path
                                                            ).read_bytes()
