"""The fake Batch API (``tests/support/fake_batch.py``) as the official ``openai`` client sees it: a
file upload, a batch through its states, output and error files, cancel, and its log."""

from __future__ import annotations

import json

import openai

from tests.support.fake_batch import FakeBatchServer


def lines(*prompts: str) -> bytes:
    return b"".join(json.dumps({"custom_id": f"c{i}", "method": "POST",
                                "url": "/v1/chat/completions",
                                "body": {"model": "m", "messages": [{"role": "user",
                                                                     "content": p}]}}
                               ).encode() + b"\n" for i, p in enumerate(prompts))


def run_batch(client: openai.OpenAI, data: bytes) -> openai.types.Batch:
    file = client.files.create(file=("in.jsonl", data), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                  completion_window="24h")
    states = [batch.status]
    while batch.status not in ("completed", "failed", "expired", "cancelled"):
        batch = client.batches.retrieve(batch.id)
        states.append(batch.status)
    assert states[0] == "validating"
    return batch


def test_happy_path_and_5xx_through_the_official_client(fake: FakeBatchServer) -> None:
    client = openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
    batch = run_batch(client, lines("Q [[gold:7]]", "Q2 [[batch5xx:1]]"))
    assert batch.status == "completed"
    assert batch.request_counts is not None and batch.request_counts.completed == 1
    out = [json.loads(x) for x in client.files.content(batch.output_file_id).text.splitlines()]
    err = [json.loads(x) for x in client.files.content(batch.error_file_id).text.splitlines()]
    assert out[0]["custom_id"] == "c0" and out[0]["response"]["status_code"] == 200
    assert "\\boxed{7}" in out[0]["response"]["body"]["choices"][0]["message"]["content"]
    assert err[0]["custom_id"] == "c1" and err[0]["response"]["status_code"] == 500
    # the same request online, through the same base URL, gets the same body
    online = client.chat.completions.create(model="m", messages=[
        {"role": "user", "content": "Q [[gold:7]]"}])
    assert online.choices[0].message.content == \
        out[0]["response"]["body"]["choices"][0]["message"]["content"]
    assert fake.answered_ok() == {"c0": 1} and fake.violations == []
    # the second time it is in a batch, the 5xx request is answered
    assert run_batch(client, lines("Q [[gold:7]]", "Q2 [[batch5xx:1]]")).error_file_id is None
    assert fake.violations == ["batch-000006: c0 was already answered 200"]


def test_expired_failed_cancelled_and_finished_unpolled(fake: FakeBatchServer) -> None:
    client = openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
    fake.expire_next = True
    batch = run_batch(client, lines("a", "b", "c", "d"))
    assert batch.status == "expired" and batch.request_counts.completed == 2
    err = client.files.content(batch.error_file_id).text.splitlines()
    assert [json.loads(x)["error"]["code"] for x in err] == ["batch_expired"] * 2
    fake.fail_next = True
    failed = run_batch(client, lines("e"))
    assert failed.status == "failed" and failed.errors.data[0].line == 1
    file = client.files.create(file=("in.jsonl", lines("f", "g")), purpose="batch")
    live = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                 completion_window="24h")
    assert fake.live() == [live.id]
    assert next(b.id for b in client.batches.list()) == live.id
    fake.finish_all()
    assert client.batches.retrieve(live.id).status == "completed" and fake.live() == []
    file = client.files.create(file=("in.jsonl", lines("h")), purpose="batch")
    live = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                 completion_window="24h")
    assert client.batches.cancel(live.id).status == "cancelling"
    assert client.batches.retrieve(live.id).status == "cancelled"
