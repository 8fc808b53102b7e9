"""Anthropic's Message Batches (``predict.anthropic.batch``) through the real ``anthropic`` SDK
against the fake Message Batches API (``tests/support/fake_anthropic_batch.py``) in front of
the fake model: the same predictions as the online backend (thinking, truncation, usage), one cache
both ways, RIMO-P in rounds, follow-ups for errored results, a rejected parameter stopping the
stage, and the key in no file."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rimo_eval.chat.batch.records import RecordStore
from rimo_eval.errors import StageError
from tests.support.anthropic_batch import (  # noqa: F401 - the fixture
    KEY_ENV,
    SECRET,
    config,
    fake_message_batches,
    predict,
)
from tests.support.cache_tools import cache_text
from tests.support.fake_anthropic_batch import FakeMessageBatches
from tests.support.openai_batch import ITEMS, n_item

THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}


def sizes(fake: FakeMessageBatches) -> list[int]:
    return [len(e["custom_ids"]) for e in fake.log if e["event"] == "create"]


def records(cache: Path) -> list[tuple[str, str | None, int]]:
    return [(r.state, r.status, r.round)
            for r in RecordStore(cache / "batches" / "anthropic").load()]


FEATURES = [n_item(0, " [[thinking:4]]"), n_item(1, " [[truncate]]"),
            n_item(2, " [[cached:5:7]]"), n_item(3, " [[thinking:1:redacted]] [[decoy:2]]"),
            n_item(4, " [[refusal]]")]


def test_replies_equal_the_online_backend_and_share_its_cache(
        fake: FakeMessageBatches, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = [*FEATURES, *ITEMS[6:]]  # and RIMO-P items of 3, 1 and 2 parts
    batched = predict(config(fake, tmp_path / "b") | THINKING, items)
    assert sizes(fake) == [8, 2, 1]  # RIMO-P in rounds: part j after part j-1's batch
    assert "round 1: msgbatch-" in capsys.readouterr().err
    assert fake.violations == [] and set(fake.answered_ok().values()) == {1}
    assert records(tmp_path / "b") == [("collected", "ended", 1), ("collected", "ended", 2),
                                       ("collected", "ended", 3)]
    preds = {p["problem_id"]: p for p in json.loads(batched)}
    assert "\\boxed{4}" in preds["n0"]["details"]["reasoning"]
    assert preds["n0"]["details"]["usage"]["reasoning_tokens"] > 0
    assert preds["n1"]["details"]["extraction"] == "truncated"
    assert preds["n2"]["details"]["usage"]["cache_read_tokens"] == 5
    assert preds["n4"]["status"] == "error" and "refus" in preds["n4"]["error"]

    sent = len(fake.model.records)
    online = predict(config(fake, tmp_path / "o", batch=False) | THINKING, items)
    assert online == batched  # byte-identical predictions
    assert len(fake.model.records) == sent + 11  # the same 11 requests (a refusal: once)
    sent = len(fake.model.records)
    assert predict(config(fake, tmp_path / "b", batch=False) | THINKING, items) == online
    assert predict(config(fake, tmp_path / "o") | THINKING, items) == online
    # each way, only the refusal (never cached) is asked again: online, then in a batch of 1
    assert len(fake.model.records) == sent + 2 and sizes(fake) == [8, 2, 1, 1]


def test_errored_and_expired_go_into_follow_ups_up_to_max_resubmits(
        fake: FakeMessageBatches, tmp_path: Path) -> None:
    items = [n_item(0, " [[batch5xx:2]]"), n_item(1, " [[fail:529:1]]"),
             *(n_item(i) for i in range(2, 5))]
    fake.expire_next = True  # the first batch ends with its second half expired
    out = json.loads(predict(config(fake, tmp_path / "b"), items))
    assert [p["status"] for p in out] == ["ok"] * 5
    # n0 api_error, n1 overloaded, n2-n4 expired; then n0 (api_error again); then n0
    assert sizes(fake) == [5, 5, 1]
    assert set(fake.answered_ok().values()) == {1} and fake.violations == []

    fake.log.clear()
    items = [n_item(0, " [[batch5xx:9]]"), *(n_item(i) for i in range(1, 4))]
    out = json.loads(predict(config(fake, tmp_path / "r", max_resubmits=1), items))
    assert out[0]["status"] == "error" and "max_resubmits: 1" in out[0]["error"]
    assert [p["status"] for p in out[1:]] == ["ok"] * 3 and sizes(fake) == [4, 1]
    out = json.loads(predict(config(fake, tmp_path / "f", max_resubmits=0,
                                    fallback_online=True), items))
    assert [p["status"] for p in out] == ["ok"] * 4  # n0 went online


def test_a_rejected_parameter_stops_the_stage_naming_the_params_key(
        fake: FakeMessageBatches, tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"rejects the request parameter 'max_tokens'.*"
                                         r"predict\.anthropic\.max_tokens"):
        predict(config(fake, tmp_path / "c"), [n_item(0, " [[reject:max_tokens]]"), n_item(1)])
    assert records(tmp_path / "c") == [("collected", "ended", 1)]  # n1's reply is cached


def test_the_key_reaches_no_file_and_the_fake_got_it(fake: FakeMessageBatches,
                                                     tmp_path: Path) -> None:
    items = [n_item(0, " [[echo_key:reply]]"), n_item(1, " [[echo_key]]")]
    out = json.loads(predict(config(fake, tmp_path / "c"), items))
    assert out[0]["status"] == "ok" and out[1]["status"] == "error"
    assert set(fake.keys_seen) == {SECRET}
    assert SECRET in json.dumps([r.reply for r in fake.model.records])  # it was echoed
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert files and not any(SECRET in f.read_text(errors="replace") for f in files)
    assert SECRET not in cache_text(tmp_path / "c") and SECRET not in json.dumps(out)


def test_api_version_goes_on_the_create_and_sampling_keys_follow_it(
        fake: FakeMessageBatches, tmp_path: Path) -> None:
    cfg = {**config(fake, tmp_path / "c"), "temperature": 0.5}
    with pytest.raises(StageError, match=r"predict\.anthropic\.temperature"):
        predict(cfg, [n_item(0)])  # the SDK's API version refuses temperature
    old = predict({**cfg, "api_version": "2023-06-01"}, [n_item(0)])
    assert json.loads(old)[0]["status"] == "ok"
    assert fake.model.records[-1].headers["anthropic-version"] == "2023-06-01"
    assert fake.model.records[-1].body["temperature"] == 0.5


def test_the_fake_takes_either_key_header_and_refuses_none(fake: FakeMessageBatches) -> None:
    url = f"{fake.base_url}/v1/messages/batches"
    for headers in ({"x-api-key": "k1"}, {"Authorization": "Bearer k2"}):
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as resp:
            assert json.loads(resp.read())["data"] == []
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url)
    assert info.value.code == 401 and fake.keys_seen == ["k1", "k2"]
