"""``kill -9`` of a batch-mode predict at each phase (upload, create, poll, download), and
repeated, against the fake Batch API: the restarted run resumes the same batch, the fake's log
shows no request answered 200 that was submitted again and never two live batches holding the
same request, and the predictions equal an online run's. Also: a batch that completes while
nothing runs is collected on the next start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rimo_eval.chat.batch.records import RecordStore
from tests.support.batch_kill import ITEMS, Driver, no_double_pay
from tests.support.fake_batch import FakeBatchServer
from tests.support.openai_batch import KEY_ENV, config, predict


@pytest.mark.parametrize("phase", ["upload", "create", "retrieve", "content"])
def test_kill_9_at_each_phase_resumes_without_paying_twice(
        fake: FakeBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        phase: str) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    driver = Driver(tmp_path, config(fake, tmp_path / "cache"), ITEMS)
    driver.kill_at(fake, phase)
    records = RecordStore(tmp_path / "cache" / "batches").load()
    expected_state = {"upload": "uploading", "create": "uploaded"}.get(phase, "live")
    assert [r.state for r in records] == [expected_state]
    batches_at_kill = list(fake.batches)
    out = driver.finish()
    no_double_pay(fake)
    if phase != "upload":  # the batch of the killed run is the one that was collected
        assert fake.batches[batches_at_kill[0]]["status"] == "completed"
        assert len(fake.batches) == 3
    online = predict(config(fake, tmp_path / "online", batch=False), ITEMS)
    assert json.dumps(out, sort_keys=True) == online


def test_kill_9_repeatedly_in_every_round(fake: FakeBatchServer, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    driver = Driver(tmp_path, config(fake, tmp_path / "cache"), ITEMS)
    for phase in ["create", "retrieve", "content", "upload", "create", "create", "retrieve",
                  "content", "retrieve"]:
        if len(fake.answered_ok()) == 10:
            break
        driver.kill_at(fake, phase)
        assert len({tuple(fake._custom_ids(b)) for b in fake.live()}) == len(fake.live())
    out = driver.finish()
    no_double_pay(fake)
    assert json.dumps(out, sort_keys=True) == predict(
        config(fake, tmp_path / "online", batch=False), ITEMS)


def test_a_batch_completed_while_nothing_ran_is_collected(
        fake: FakeBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    driver = Driver(tmp_path, config(fake, tmp_path / "cache"), ITEMS)
    driver.kill_at(fake, "retrieve")
    fake.finish_all()  # the provider finishes while predict is not running
    out = driver.finish()
    no_double_pay(fake)
    first = RecordStore(tmp_path / "cache" / "batches").load()[0]
    assert (first.state, first.status) == ("collected", "completed")
    assert len(fake.batches) == 3 and out
