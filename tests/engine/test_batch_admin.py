"""``rimo-eval predict --batch-status`` and ``--batch-cancel`` over the records a killed batch
run left, against the fake Batch API; the next run collects the cancelled batch and asks its
requests again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rimo_eval.cli import main
from tests.support.batch_kill import ITEMS, Driver, no_double_pay, params_file
from tests.support.fake_batch import FakeBatchServer
from tests.support.openai_batch import KEY_ENV, config


def test_status_lists_and_cancel_cancels_the_live_batch(
        fake: FakeBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    path = params_file(tmp_path, fake)
    assert main(["predict", "--params", str(path), "--batch-status"]) == 0
    assert "no live batches" in capsys.readouterr().out

    driver = Driver(tmp_path, config(fake, tmp_path / "cache"), ITEMS)
    driver.kill_at(fake, "retrieve")
    [batch_id] = fake.live()
    fake.advance_every = 1000  # a status call must not look like progress here
    state = fake.batches[batch_id]["status"]
    assert main(["predict", "--params", str(path), "--batch-status"]) == 0
    out = capsys.readouterr().out
    assert batch_id in out and f"{state}, 0/7 done" in out and " 7 " in out
    assert main(["predict", "--params", str(path), "--batch-cancel"]) == 0
    assert "cancelling" in capsys.readouterr().out
    assert [e for e in fake.log if e["event"] == "cancel"] == [
        {"event": "cancel", "batch": batch_id}]

    fake.advance_every = 1
    preds = driver.finish()  # collects the cancelled batch, asks its requests again
    assert fake.batches[batch_id]["status"] == "cancelled"
    assert [p["status"] for p in preds] == ["ok"] * len(ITEMS)
    no_double_pay(fake)
    assert main(["predict", "--params", str(path), "--batch-status"]) == 0
    assert "no live batches" in capsys.readouterr().out
    assert json.dumps(preds)
