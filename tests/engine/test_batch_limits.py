"""Batch mode's limits and stops: a round over ``max_requests`` or ``max_bytes`` is split into
several batches; a 4xx naming a request parameter stops the stage as online; an unreachable
endpoint stops at the probe, before any upload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rimo_eval.chat.batch.records import RecordStore
from rimo_eval.errors import StageError
from tests.support.chat_server import BlackHole, ChatServer
from tests.support.fake_batch import FakeBatchServer
from tests.support.openai_batch import ITEMS, KEY_ENV, config, n_item, predict


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")


def sizes(fake: FakeBatchServer) -> list[int]:
    return [len(e["custom_ids"]) for e in fake.log if e["event"] == "create"]


def test_a_round_is_split_at_max_requests_and_max_bytes(fake: FakeBatchServer,
                                                        tmp_path: Path) -> None:
    online = predict(config(fake, tmp_path / "o", batch=False), ITEMS)
    assert predict(config(fake, tmp_path / "r", max_requests=4), ITEMS) == online
    assert sorted(sizes(fake)) == [1, 1, 2, 4, 4]  # round 1: 9 requests in 4 + 4 + 1
    fake.log.clear()
    files_before = set(fake.files)
    assert predict(config(fake, tmp_path / "b", max_bytes=1500), ITEMS) == online
    inputs = [f for fid, f in fake.files.items()
              if fid not in files_before and f["purpose"] == "batch"]
    assert len(inputs) == len(sizes(fake)) > 3 and sum(sizes(fake)) == 12
    # every uploaded file is within max_bytes, or one line alone that is longer
    assert all(f["bytes"] <= 1500 or f["_data"].count(b"\n") == 1 for f in inputs)
    assert any(f["_data"].count(b"\n") > 1 for f in inputs)
    assert fake.violations == []


def test_a_4xx_naming_a_parameter_stops_the_stage(fake: FakeBatchServer, tmp_path: Path) -> None:
    fake.chat.reasoning_model = True  # HTTP 400 naming max_tokens, as OpenAI's o-series
    with pytest.raises(StageError, match=r"rejects the request parameter 'max_tokens'.*"
                                         r"predict\.openai\.max_tokens"):
        predict({**config(fake, tmp_path / "c"), "temperature": None, "max_tokens": 64},
                [n_item(0)])


def test_a_refused_endpoint_stops_at_the_probe(fake: FakeBatchServer, tmp_path: Path) -> None:
    closed = ChatServer().start()
    url = closed.base_url
    closed.stop()  # nothing listens there now: connection refused
    with pytest.raises(StageError, match=r"127\.0\.0\.1"):
        predict({**config(fake, tmp_path / "c"), "base_url": url}, [n_item(0)])
    assert not list((tmp_path / "c").rglob("batches/*.json"))  # nothing recorded or uploaded
    assert fake.files == {}


def test_a_silent_endpoint_stops_the_stage_and_leaves_no_live_record(
        fake: FakeBatchServer, tmp_path: Path) -> None:
    hole = BlackHole().start()
    try:
        cfg = {**config(fake, tmp_path / "c"), "base_url": hole.base_url, "timeout_s": 1.0,
               "max_retries": 0}
        with pytest.raises(StageError, match="timed out"):
            predict(cfg, [n_item(0)])
    finally:
        hole.stop()
    # at most an "uploading" record, which the next start drops: no batch was created
    assert [r.state for r in RecordStore(tmp_path / "c" / "batches").load()] in ([], ["uploading"])


def test_an_unreadable_batch_record_stops_the_stage_naming_it(fake: FakeBatchServer,
                                                             tmp_path: Path) -> None:
    folder = tmp_path / "c" / "batches"
    folder.mkdir(parents=True)
    (folder / "0001-ab.json").write_text("{torn")
    with pytest.raises(StageError, match=r"0001-ab\.json: not a batch record"):
        predict(config(fake, tmp_path / "c"), [n_item(0)])
    assert fake.files == {}  # nothing uploaded on a guess


def test_a_second_run_on_the_same_cache_folder_stops(fake: FakeBatchServer,
                                                     tmp_path: Path) -> None:
    other = RecordStore(tmp_path / "c" / "batches")
    other.lock()  # as a concurrent predict process holds it
    try:
        with pytest.raises(StageError, match="another predict is sending batches"):
            predict(config(fake, tmp_path / "c"), [n_item(0)])
    finally:
        other.unlock()
    assert fake.files == {}
    assert json.loads(predict(config(fake, tmp_path / "c"), [n_item(0)]))[0]["status"] == "ok"
