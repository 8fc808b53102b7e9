"""A batch's results download is bounded per line (issue 42 §3, ``chat/batch/results_cap``):
a results line larger than ``max_reply_bytes`` plus the envelope allowance stops the stage with
an error naming the batch and the key, read no further; honest results (large in total) pass.
Against the fake Batch APIs (OpenAI's files, Anthropic's results stream) on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from rimo_eval.chat.batch.results_cap import ENVELOPE_BYTES
from rimo_eval.errors import StageError
from tests.support import anthropic_batch, openai_batch
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_anthropic_batch import FakeMessageBatches
from tests.support.fake_batch import FakeBatchServer

CAP = 4096
HUGE = b'{"custom_id": "' + b"x" * (CAP + ENVELOPE_BYTES + 1) + b'"}\n'


def test_an_openai_results_line_past_the_cap_stops_the_stage(
        fake: FakeBatchServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(openai_batch.KEY_ENV, "sk-test")
    real = fake._finish

    def finish(bid: str, status: str) -> None:  # the output file gets one huge line first
        real(bid, status)
        file_id = fake.batches[bid]["output_file_id"]
        fake.files[file_id]["_data"] = HUGE + fake.files[file_id]["_data"]

    monkeypatch.setattr(fake, "_finish", finish)
    cfg = openai_batch.config(fake, tmp_path / "c") | {"max_reply_bytes": CAP}
    with pytest.raises(StageError) as err:
        openai_batch.predict(cfg, openai_batch.ITEMS[:3])
    assert "predict.openai.batch: the results of batch " in str(err.value)
    assert f"predict.openai.max_reply_bytes (plus {ENVELOPE_BYTES} bytes per result) = " \
        f"{CAP + ENVELOPE_BYTES}" in str(err.value)


def test_openai_results_under_the_cap_are_read(fake: FakeBatchServer,
                                               tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(openai_batch.KEY_ENV, "sk-test")
    cfg = openai_batch.config(fake, tmp_path / "c") | {"max_reply_bytes": CAP}
    preds = openai_batch.predict(cfg, openai_batch.ITEMS[:3])
    assert '"status": "error"' not in preds


def test_an_anthropic_results_line_past_the_cap_stops_the_stage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(anthropic_batch.KEY_ENV, anthropic_batch.SECRET)
    model = FakeAnthropic(retry_after="0").start()
    fake = FakeMessageBatches(model=model).start()
    real = fake.results
    monkeypatch.setattr(fake, "results",
                        lambda bid: None if real(bid) is None else HUGE + (real(bid) or b""))
    cfg = anthropic_batch.config(fake, tmp_path / "c") | {"max_reply_bytes": CAP}
    try:
        with pytest.raises(StageError) as err:
            anthropic_batch.predict(cfg, openai_batch.ITEMS[:3])
    finally:
        fake.stop()
        model.stop()
    assert "predict.anthropic.batch: the results of batch msgbatch" in str(err.value)
    assert f"= {CAP + ENVELOPE_BYTES} bytes decoded" in str(err.value)
