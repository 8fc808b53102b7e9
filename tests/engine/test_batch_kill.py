"""``kill -9`` of a batch-mode predict at each phase (upload, create, poll, download), and
repeated, against the fake Batch API: the restarted run resumes the same batch, the fake's log
shows no request answered 200 that was submitted again and never two live batches holding the
same request, and the predictions equal an online run's. Also: a batch that completes while
nothing runs is collected on the next start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.chat.batch.records import RecordStore
from rimo_eval.core.items import Item
from tests.engine.test_batch_transport import KEY_ENV, config, n_item, p_item, predict
from tests.support.batch_fake_base import BatchFake
from tests.support.fake_batch import FakeBatchServer

DRIVER = """
import json, sys
from dataclasses import asdict
from rimo_eval.core.items import Item
from {module} import {predictor} as Predictor
config, items_path, out_path = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
items = [Item(**{{**d, "sub_problems": tuple(d["sub_problems"]),
                 "sub_solutions": tuple(d["sub_solutions"])}}) for d in json.load(open(items_path))]
preds = Predictor(config).predict(items)
json.dump([asdict(p) for p in preds], open(out_path, "w"), sort_keys=True)
"""
ITEMS = [*(n_item(i) for i in range(5)), p_item(0, 3), p_item(1, 2)]


class Driver:
    """A predict in a child process, to kill at a held phase of a fake batch API."""

    def __init__(self, tmp_path: Path, cfg: dict[str, Any], items: list[Item],
                 predictor: str = "rimo_eval.predictors.openai_chat:OpenAIPredictor") -> None:
        (tmp_path / "config.json").write_text(json.dumps(cfg))
        (tmp_path / "items.json").write_text(json.dumps([asdict(it) for it in items]))
        module, name = predictor.split(":")
        (tmp_path / "driver.py").write_text(DRIVER.format(module=module, predictor=name))
        self.out = tmp_path / "out.json"
        self.argv = [sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "config.json"),
                     str(tmp_path / "items.json"), str(self.out)]
        self.env = {**os.environ, KEY_ENV: "sk-test"}

    def kill_at(self, fake: BatchFake, phase: str) -> None:
        fake.hold = {phase}
        proc = subprocess.Popen(self.argv, env=self.env, stderr=subprocess.DEVNULL)
        try:
            assert fake.held.wait(60), f"never reached {phase}"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        fake.hold = set()
        fake.release()
        assert not self.out.exists()

    def finish(self) -> list[dict[str, Any]]:
        subprocess.run(self.argv, env=self.env, check=True, stderr=subprocess.DEVNULL,
                       timeout=120)
        return json.loads(self.out.read_text())


def no_double_pay(fake: FakeBatchServer) -> None:
    assert fake.violations == []  # no live duplicate, nothing answered 200 re-submitted
    assert set(fake.answered_ok().values()) == {1}
    assert len(fake.answered_ok()) == 5 + 3 + 2


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
