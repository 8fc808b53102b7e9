"""The issue's "Done when": a full 791-item run (the real upstream RIMO, validated) in batch mode
against the fake Batch API, with faults (an expired first batch, 5xx lines, a follow-up per
fault) and kill -9 in three rounds at three phases, gives predictions byte-identical to the
online run of the same fake model (so the same metrics), and the fake's log shows no request
answered 200 submitted again and never two live batches with the same request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rimo_eval.artifacts.items import load_items
from rimo_eval.params.config import parse_params
from rimo_eval.predict import predict as predict_stage
from rimo_eval.rimo.tracks import TRACKS
from rimo_eval.score.stage import score
from rimo_eval.validate.stage import run as validate_run
from tests.support.batch_kill import Driver
from tests.support.factories import params as project_params
from tests.support.factories import predict_section
from tests.support.fake_batch import FakeBatchServer
from tests.support.openai_batch import KEY_ENV, config, predict
from tests.support.paths import REPO_ROOT


@pytest.mark.slow
def test_full_791_item_batch_run_with_faults_and_kills_equals_online(
        fake: FakeBatchServer, raw_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    items_dir = tmp_path / "items"
    validate_run(project_params(validate={"errata": str(REPO_ROOT / "data" / "errata.yaml")}),
                 raw_dir=raw_dir, items_dir=items_dir, report_path=tmp_path / "v.json")
    items = [it for t in TRACKS for it in load_items(t, items_dir)]
    assert len(items) == 791
    requests = sum(1 if not it.sub_problems else len(it.sub_problems) for it in items)

    online = predict(config(fake, tmp_path / "online", batch=False), items)
    answered_online = len(fake.chat.records)
    assert answered_online == requests

    fake.expire_next, fake.flaky_every = True, 97  # faults: follow-up batches
    driver = Driver(tmp_path, config(fake, tmp_path / "cache"), items)
    for phase in ("create", "retrieve", "content", "retrieve", "upload", "content"):
        driver.kill_at(fake, phase)
    batched = driver.finish()
    assert json.dumps(batched, sort_keys=True) == online
    assert fake.violations == []
    assert set(fake.answered_ok().values()) == {1} and len(fake.answered_ok()) == requests
    creates = [e for e in fake.log if e["event"] == "create"]
    assert 4 < len(creates) < 20  # 4 rounds plus the follow-ups

    # The stages themselves: predict over each cache (nothing is sent), then score: the same
    # metrics (and prediction and score files byte for byte).
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    metrics = {}
    for name, cfg in (("batch", config(fake, tmp_path / "cache")),
                      ("online", config(fake, tmp_path / "online", batch=False))):
        sent = len(fake.chat.records)
        out = tmp_path / name
        predict_stage(predict_section(backend="openai", limit=None, openai=cfg), items_dir,
                      out / "preds", out / "run.json")
        assert len(fake.chat.records) == sent and len(fake.batches) == len(creates)
        whole = parse_params(params)
        score(whole.score, items_dir, out / "preds", out / "scores", out / "metrics.json",
              out / "plots", whole)
        metrics[name] = json.loads((out / "metrics.json").read_text())
        metrics[name].pop("provenance")  # the hash of a file that names these tmp paths
    assert metrics["batch"] == metrics["online"] and metrics["online"]["RIMO-N"]
    for path in ("preds/rimo_n.parquet", "preds/rimo_p.parquet", "scores/rimo_n.parquet",
                 "scores/rimo_p.parquet"):
        assert (tmp_path / "batch" / path).read_bytes() == (tmp_path / "online" / path
                                                            ).read_bytes()
