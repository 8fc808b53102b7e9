"""Never paying twice with Message Batches: ``kill -9`` of a batch-mode anthropic predict at each
durable step (before the create, between the create and recording its id, while polling, while
reading the results), and repeatedly, against the fake Message Batches API: the rerun adopts
the same batch, the fake saw each request in exactly one batch, and the predictions equal an
uninterrupted run's. A create the kill left unrecorded among several same-sized batches stops
the stage naming them, and ``--batch-status`` / ``--batch-cancel`` show and settle it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rimo_eval.chat.batch.records import RecordStore
from rimo_eval.cli import main
from rimo_eval.errors import StageError
from tests.support.anthropic_batch import (  # noqa: F401 - the fixture
    KEY_ENV,
    config,
    fake_message_batches,
    predict,
)
from tests.support.batch_kill import ITEMS, Driver, params_file
from tests.support.fake_anthropic_batch import FakeMessageBatches

PREDICTOR = "rimo_eval.predictors.native_chat:AnthropicPredictor"
REQUESTS = 5 + 3 + 2  # ITEMS: five RIMO-N, RIMO-P of 3 and 2 parts


def driver(tmp_path: Path, fake: FakeMessageBatches) -> Driver:
    return Driver(tmp_path, config(fake, tmp_path / "cache"), ITEMS, PREDICTOR)


def store(tmp_path: Path) -> RecordStore:
    return RecordStore(tmp_path / "cache" / "batches" / "anthropic")


def no_double_pay(fake: FakeMessageBatches) -> None:
    assert fake.violations == []  # no live duplicate, nothing answered 200 re-submitted
    assert set(fake.answered_ok().values()) == {1} and len(fake.answered_ok()) == REQUESTS


def in_one_batch_each(fake: FakeMessageBatches) -> None:
    """With no faults, the fake saw each request in exactly one batch, kills or not."""
    seen = Counter(c for e in fake.log if e["event"] == "create" for c in e["custom_ids"])
    assert len(seen) == REQUESTS and set(seen.values()) == {1}


def uninterrupted(fake: FakeMessageBatches, tmp_path: Path) -> str:
    log, fake.log = fake.log, []  # its own batches stay out of the killed run's checks
    try:
        return predict(config(fake, tmp_path / "straight"), ITEMS)
    finally:
        fake.log = log


@pytest.mark.parametrize("phase", ["precreate", "create", "retrieve", "results"])
def test_kill_9_at_each_step_resumes_without_paying_twice(
        fake: FakeMessageBatches, tmp_path: Path, phase: str) -> None:
    run = driver(tmp_path, fake)
    run.kill_at(fake, phase)
    [record] = store(tmp_path).load()
    assert record.state == ("creating" if phase in ("precreate", "create") else "live")
    made = list(fake.batches)
    assert len(made) == (0 if phase == "precreate" else 1)
    out = run.finish()
    no_double_pay(fake)
    in_one_batch_each(fake)
    if made:  # the killed run's batch is the one collected: found again, never made twice
        assert store(tmp_path).load()[0].batch_id == made[0]
    assert len(fake.batches) == 3
    assert json.dumps(out, sort_keys=True) == uninterrupted(fake, tmp_path)


def test_kill_9_repeatedly_in_every_round(fake: FakeMessageBatches, tmp_path: Path) -> None:
    run = driver(tmp_path, fake)
    for phase in ["create", "retrieve", "results", "precreate", "create", "create",
                  "retrieve", "results", "retrieve"]:
        if len(fake.answered_ok()) == REQUESTS:
            break
        run.kill_at(fake, phase)
        assert len({tuple(fake._custom_ids(b)) for b in fake.live()}) == len(fake.live())
    out = run.finish()
    no_double_pay(fake)
    in_one_batch_each(fake)
    assert json.dumps(out, sort_keys=True) == uninterrupted(fake, tmp_path)


def test_an_unrecorded_create_among_same_sized_batches_stops_then_status_and_cancel_settle_it(
        fake: FakeMessageBatches, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = params_file(tmp_path, fake, "anthropic", KEY_ENV)
    run = driver(tmp_path, fake)
    run.kill_at(fake, "create")  # the batch exists; its id was never recorded
    [ours] = fake.batches
    [record] = store(tmp_path).load()
    foreign = fake.create({"requests": [{"custom_id": f"other-{i}", "params": {
        "model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}}
        for i in range(7)]}, {"x-api-key": "k"})["id"]  # another run's, of the same size
    with pytest.raises(StageError) as info:
        predict(config(fake, tmp_path / "cache"), ITEMS)
    said = str(info.value)
    assert record.id in said and ours in said and foreign in said and "--batch-cancel" in said
    assert list(fake.batches) == [ours, foreign]  # no second batch for those keys

    assert main(["predict", "--params", str(path), "--batch-status"]) == 0
    out = capsys.readouterr().out
    assert "create not confirmed" in out and ours in out and foreign in out
    assert main(["predict", "--params", str(path), "--batch-cancel"]) == 0
    assert capsys.readouterr().out.count("canceling") == 2

    preds = run.finish()  # the ended batches' results tell ours apart: adopted, collected
    assert store(tmp_path).load()[0].batch_id == ours
    assert [p["status"] for p in preds] == ["ok"] * len(ITEMS)
    no_double_pay(fake)
    assert main(["predict", "--params", str(path), "--batch-status"]) == 0
    assert "no live batches" in capsys.readouterr().out


def test_status_lists_the_live_batch_and_its_counts(
        fake: FakeMessageBatches, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = params_file(tmp_path, fake, "anthropic", KEY_ENV)
    assert main(["predict", "--params", str(path), "--batch-status"]) == 0
    assert "no live batches" in capsys.readouterr().out
    driver(tmp_path, fake).kill_at(fake, "retrieve")
    [batch_id] = fake.live()
    fake.advance_every = 1000  # a status call must not look like progress here
    assert main(["predict", "--params", str(path), "--batch-status"]) == 0
    out = capsys.readouterr().out
    assert batch_id in out and "in_progress, 0/7 succeeded, 0 errored" in out and " 7 " in out
