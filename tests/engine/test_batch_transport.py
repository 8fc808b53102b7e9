"""The Batch API path of the openai backend (``predict.openai.batch``) against the fake Batch API
(``tests/support/fake_batch.py``) in front of the fake model: the same predictions as online, one
cache both ways, RIMO-P in rounds, follow-ups for the error file, failed batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rimo_eval.chat.batch.records import RecordStore
from rimo_eval.errors import StageError
from tests.support.fake_batch import FakeBatchServer
from tests.support.openai_batch import ITEMS, KEY_ENV, config, n_item, p_item, predict


def chat_requests(fake: FakeBatchServer) -> int:
    return len(fake.chat.records)


def test_batch_run_is_byte_identical_to_online_and_shares_the_cache(
        fake: FakeBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    batched = predict(config(fake, tmp_path / "b"), ITEMS)
    # RIMO-P in rounds: 6 + 3 first parts, then 2 second parts, then 1 third part
    creates = [e for e in fake.log if e["event"] == "create"]
    assert [len(e["custom_ids"]) for e in creates] == [9, 2, 1]
    err = capsys.readouterr().err
    assert "round 1: batch-" in err and "round 3: batch-" in err and "9/9 done" in err
    assert fake.violations == [] and set(fake.answered_ok().values()) == {1}
    records = RecordStore(tmp_path / "b" / "batches").load()
    assert [(r.state, r.status, r.round) for r in records] == [
        ("collected", "completed", 1), ("collected", "completed", 2),
        ("collected", "completed", 3)]

    online_before = chat_requests(fake)
    online = predict(config(fake, tmp_path / "o", batch=False), ITEMS)
    assert online == batched  # byte-identical predictions
    assert chat_requests(fake) == online_before + 12  # 12 online requests, the same bodies
    # an online re-run over the batch cache sends nothing, and a batch run over the online
    # cache creates no batch
    sent = chat_requests(fake)
    assert predict(config(fake, tmp_path / "b", batch=False), ITEMS) == online
    assert predict(config(fake, tmp_path / "o"), ITEMS) == online
    assert chat_requests(fake) == sent and len(fake.batches) == 3


def test_batch_after_a_partial_online_run_sends_only_what_is_missing(
        fake: FakeBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    predict(config(fake, tmp_path / "c", batch=False), ITEMS[:4])
    predict(config(fake, tmp_path / "c"), ITEMS)
    creates = [e["custom_ids"] for e in fake.log if e["event"] == "create"]
    assert [len(c) for c in creates] == [5, 2, 1]
    assert set(fake.answered_ok().values()) == {1}


def test_k3_rimo_p_rounds(fake: FakeBatchServer, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    items = [n_item(0), p_item(0, 4), p_item(1, 2)]
    batched = predict(config(fake, tmp_path / "b"), items, samples=3)
    creates = [e["custom_ids"] for e in fake.log if e["event"] == "create"]
    assert [len(c) for c in creates] == [9, 6, 3, 3]  # at most 4 rounds
    assert predict(config(fake, tmp_path / "o", batch=False), items, samples=3) == batched


def test_5xx_and_expired_go_into_follow_up_batches(fake: FakeBatchServer, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    items = [n_item(0, " [[batch5xx:2]]"), *(n_item(i) for i in range(1, 4))]
    fake.expire_next = True  # the first batch expires with half its requests done
    batched = json.loads(predict(config(fake, tmp_path / "b"), items))
    assert [p["status"] for p in batched] == ["ok"] * 4
    creates = [e["custom_ids"] for e in fake.log if e["event"] == "create"]
    # n0 (5xx) and n1 answered, n2 and n3 expired; then n0 (5xx again), n2, n3; then n0
    assert [len(c) for c in creates] == [4, 3, 1]
    assert set(fake.answered_ok().values()) == {1} and fake.violations == []


def test_max_resubmits_then_error_or_online(fake: FakeBatchServer, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    items = [n_item(0, " [[batch5xx:9]]"), *(n_item(i) for i in range(1, 30))]
    out = json.loads(predict(config(fake, tmp_path / "b", max_resubmits=1), items))
    assert out[0]["status"] == "error" and "max_resubmits: 1" in out[0]["error"]
    assert [p["status"] for p in out[1:]] == ["ok"] * 29
    assert [len(e["custom_ids"]) for e in fake.log if e["event"] == "create"] == [30, 1]
    online = json.loads(predict(config(fake, tmp_path / "f", max_resubmits=0,
                                       fallback_online=True), items))
    assert [p["status"] for p in online] == ["ok"] * 30  # the 5xx request went online


def test_a_failed_batch_stops_the_stage_naming_the_line(fake: FakeBatchServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    fake.fail_next = True
    with pytest.raises(StageError, match=r"failed validation: line 1: The model 'fake-model'"):
        predict(config(fake, tmp_path / "b"), ITEMS[:2])


def test_a_create_whose_answer_was_lost_is_found_and_never_sent_twice(
        fake: FakeBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    items = ITEMS[:4]  # RIMO-N only: one round, one batch
    online = predict(config(fake, tmp_path / "o", batch=False), items)
    fake.lose_next_create = True  # made, but the client hears a 500 (max_retries: 1)
    batched = predict(config(fake, tmp_path / "b"), items)
    assert len(fake.batches) == 1  # found in the list, not created again
    assert json.loads(batched) == json.loads(online)
