"""The OpenAI-compatible backend, driven through the real ``openai`` client against a loopback
server (``chat_server.py``): retries, failures, cache, resume after ``kill -9``, RIMO-P chaining
and keeping the API key out of every artifact."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.chat.cache import DB_NAME
from rimo_eval.chat.redact import Redactor
from rimo_eval.errors import StageError
from rimo_eval.io.hashing import fingerprint
from rimo_eval.predictors import create_predictor
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.cache_tools import cache_entries, cache_text, compress, set_data
from tests.support.chat_server import ChatServer, echo_reply
from tests.support.factories import backend_section
from tests.support.openai_backend import (
    KEY_ENV,
    SECRET,
    cache_files,
    gold_items,
    kill_when_stalled,
    make_config,
    n_item,
    p_item,
    run,
)

pytestmark = [pytest.mark.chat_server(hang_s=60.0), pytest.mark.api_key(KEY_ENV, SECRET)]


# --- answers, details, extraction ------------------------------------------------------------
def test_rimo_n_predictions_and_details(server: ChatServer, tmp_path: Path) -> None:
    items = [n_item("a", "Find x. [[gold:2^{10}]]"), n_item("b", "Find y, no box in reply")]
    preds = run(make_config(server, tmp_path), items)
    a, b = preds["a"], preds["b"]
    assert (a.status, a.prediction) == ("ok", "2^{10}")
    assert a.details["extraction"] == "boxed"
    assert a.details["raw_text"].endswith(r"\boxed{2^{10}}.")
    assert a.details["finish_reason"] == "stop"
    assert a.details["usage"]["completion_tokens"] > 0
    assert len(a.details["request_sha256"]) == 64
    # Timing lives in the cache entry, so identical runs give byte-identical predictions.
    assert "latency_s" not in a.details
    (entry,) = [e for e in cache_entries(tmp_path / "cache")
                if e.key == a.details["request_sha256"]]
    assert entry.response is not None and entry.response["latency_s"] >= 0
    # No box: the call succeeded, the answer is empty (scored wrong), and the details say why.
    assert (b.status, b.prediction, b.details["extraction"]) == ("ok", "", "none")
    prompt = server.ok_records()[0].prompt
    assert r"\boxed{}" in prompt and "Problem:" in prompt


def test_registry_builds_the_backend(server: ChatServer, tmp_path: Path) -> None:
    predictor = create_predictor("openai", backend_section("openai", make_config(server, tmp_path)))
    assert isinstance(predictor, OpenAIPredictor)


def test_system_prompt_and_sampling_are_sent(server: ChatServer, tmp_path: Path) -> None:
    config = make_config(server, tmp_path, system_prompt="You are careful.", temperature=0.7,
                         top_p=0.9, max_tokens=321, seed=5, extra_body={"top_k": 20})
    run(config, [n_item("a", "[[gold:1]]")])
    body = server.ok_records()[0].body
    assert body is not None
    assert body["messages"][0] == {"role": "system", "content": "You are careful."}
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"],
            body["top_k"]) == (0.7, 0.9, 321, 5, 20)
    assert "n" not in body  # n=1 is the default and not sent


def test_n_is_replaced_by_samples(server: ChatServer, tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"predict\.samples"):
        OpenAIPredictor(backend_section("openai", make_config(server, tmp_path, n=3)))


# --- retries and failures --------------------------------------------------------------------
@pytest.mark.serial  # the hang case: every reply within a 0.5 s client timeout
@pytest.mark.parametrize("fault", ["fail:429:2", "fail:503:3", "fail:500:1", "drop:2",
                                   "malformed:1", "empty:2", "hang:1"])
def test_transient_faults_are_retried(server: ChatServer, tmp_path: Path, fault: str) -> None:
    items = [n_item("bad", f"Flaky [[{fault}]] [[gold:11]]"), *gold_items(3)]
    timeout = 0.5 if fault.startswith("hang") else 10.0  # generous unless a timeout is the point
    preds = run(make_config(server, tmp_path, timeout_s=timeout), items)
    assert all(p.status == "ok" for p in preds.values()), preds["bad"].error
    assert preds["bad"].prediction == "11"
    faulty = [r for r in server.records if "Flaky" in r.prompt]
    expected_failures = int(fault.rsplit(":", 1)[1])
    assert len(faulty) == expected_failures + 1
    assert [r.outcome for r in faulty].count("ok") == 1


def test_persistent_failure_is_recorded_for_that_item_only(server: ChatServer,
                                                           tmp_path: Path) -> None:
    items = [n_item("bad", "Broken [[fail:500:*]]"), p_item("pbad", ["A [[fail:503:*]]", "B"]),
             *gold_items(4)]
    preds = run(make_config(server, tmp_path, max_retries=2), items)
    bad, pbad = preds.pop("bad"), preds.pop("pbad")
    assert bad.status == "error" and bad.prediction is None
    assert "500" in bad.error and "3 attempt" in bad.error
    assert pbad.status == "error" and pbad.error.startswith("part 1 of 2:")
    assert len([r for r in server.records if "Broken" in r.prompt]) == 3
    assert all(p.status == "ok" and p.prediction for p in preds.values())
    # A failed request is not cached: the next run asks again.
    server.reset()
    run(make_config(server, tmp_path, max_retries=0), items)
    assert len(server.records) == 2


@pytest.mark.serial  # the other replies must come within the 0.3 s client timeout
def test_timeout_that_persists_is_an_error(server: ChatServer, tmp_path: Path) -> None:
    preds = run(make_config(server, tmp_path, timeout_s=0.3, max_retries=1),
                [n_item("slow", "Slow [[hang:*]]"), *gold_items(2)])
    assert preds["slow"].status == "error" and "Timeout" in preds["slow"].error
    assert preds["n1"].prediction == "7"


def test_client_errors_are_not_retried(server: ChatServer, tmp_path: Path) -> None:
    preds = run(make_config(server, tmp_path), [n_item("bad", "Too long [[fail:400:*]]")])
    assert preds["bad"].status == "error" and "1 attempt" in preds["bad"].error
    assert len(server.records) == 1


@pytest.mark.parametrize("code", [401, 403, 404])
def test_configuration_errors_stop_the_stage(server: ChatServer, tmp_path: Path,
                                             code: int) -> None:
    with pytest.raises(StageError, match=str(code)) as info:
        run(make_config(server, tmp_path), [n_item("x", f"[[fail:{code}:*]]"), *gold_items(3)])
    assert SECRET not in str(info.value)


def test_concurrency_is_bounded_and_used(server: ChatServer, tmp_path: Path) -> None:
    server.latency_s = 0.1
    run(make_config(server, tmp_path, concurrency=4), gold_items(16))
    events = sorted([(r.started, 1) for r in server.records]
                    + [(r.finished or 0.0, -1) for r in server.records])
    in_flight = peak = 0
    for _, step in events:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak == 4


# --- RIMO-P chaining -------------------------------------------------------------------------
def test_rimo_p_parts_chain_in_order(server: ChatServer, tmp_path: Path) -> None:
    server.latency_s = 0.05
    parts = ["Show that K lies on AD.", "Prove PDC ~ PAX.", "Conclude the angle equality."]
    items = [p_item("p3", parts), p_item("q2", ["First claim.", "Second claim."]),
             p_item("one", ["Prove it all."], problem="Prove it all.")]
    preds = run(make_config(server, tmp_path, concurrency=3), items)
    for item in items:
        records = [r for r in server.ok_records() if item.problem in r.prompt]
        replies = [r.reply for r in records]
        assert len(records) == len(item.sub_problems)
        assert preds[item.problem_id].prediction == [echo_reply(r.prompt) for r in records]
        for k, record in enumerate(records):
            # Request k holds the replies to parts 1..k-1, in order, and part k itself.
            positions = [record.prompt.index(reply) for reply in replies[:k]]
            assert positions == sorted(positions)
            assert all(reply not in record.prompt for reply in replies[k:])
            assert item.sub_problems[k] in record.prompt
            if k:
                assert record.started >= records[k - 1].finished  # sequential within an item
        assert [p["raw_text"] for p in preds[item.problem_id].details["parts"]] == replies
    one = next(r for r in server.ok_records() if "Prove it all." in r.prompt)
    assert one.prompt.count("Prove it all.") == 1  # a one-part item is not repeated as Part 1
    first = [r for r in server.ok_records() if "Part 1 of" in r.prompt]
    assert first and all("already proved" not in r.prompt for r in first)


# --- cache -----------------------------------------------------------------------------------
def test_second_run_is_served_from_cache(server: ChatServer, tmp_path: Path) -> None:
    items = [*gold_items(5), p_item("p", ["A", "B", "C"]), n_item("x", "no box")]
    config = make_config(server, tmp_path)
    first = run(config, items)
    sent = len(server.records)
    assert sent == 9 and len(cache_files(config)) == 9
    second = run(config, items)
    assert len(server.records) == sent  # zero requests
    # Byte-identical predictions: details are a function of the cached replies only.
    assert [asdict(second[k]) for k in sorted(second)] == [asdict(first[k]) for k in sorted(first)]
    files = {p.name for p in Path(config["cache_dir"]).iterdir()}  # a bounded number of files
    assert DB_NAME in files and files <= {DB_NAME, f"{DB_NAME}-shm", f"{DB_NAME}-wal"}


def test_cache_key_follows_request_not_operational_knobs(server: ChatServer,
                                                         tmp_path: Path) -> None:
    items = gold_items(3)
    base = make_config(server, tmp_path)
    run(base, items)
    run({**base, "concurrency": 2, "timeout_s": 5.0, "max_retries": 1}, items)
    assert len(server.records) == 3
    run({**base, "temperature": 0.5}, items)
    assert len(server.records) == 6

    def fp(config: dict[str, Any]) -> str:
        return fingerprint(OpenAIPredictor(backend_section("openai", config)).identity())

    assert fp(base) == fp({**base, "concurrency": 3})
    assert fp(base) != fp({**base, "temperature": 0.5})
    assert fp(base) != fp({**base, "model": "other"})


def test_corrupt_cache_entry_is_a_miss_and_rewritten(server: ChatServer, tmp_path: Path) -> None:
    config = make_config(server, tmp_path)
    items = gold_items(3)
    run(config, items)
    torn, wrong, other = cache_files(config)
    folder = config["cache_dir"]
    assert torn.request is not None and wrong.request is not None and other.request is not None
    good = compress({"request": torn.request, "response": torn.response})
    set_data(folder, torn.key, good[:40])  # torn bytes: the zstd frame does not decode
    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 0x20  # one flipped bit inside: the frame checksum fails
    set_data(folder, other.key, bytes(flipped))
    wrong.request["request"]["messages"][0]["content"] = "other"  # right key, wrong content
    set_data(folder, wrong.key, compress({"request": wrong.request, "response": wrong.response}))
    server.reset()
    preds = run(config, items)
    assert len(server.records) == 3
    assert all(p.status == "ok" for p in preds.values())
    again = {e.key: e for e in cache_files(config)}
    assert set(again) == {torn.key, wrong.key, other.key}  # each rewritten whole
    assert all(e.request is not None and fingerprint(e.request) == e.key
               for e in again.values())


def test_identical_requests_in_one_run_are_sent_once(server: ChatServer, tmp_path: Path) -> None:
    server.latency_s = 0.1  # both items are in flight together
    twins = [n_item("a", "Same text [[gold:4]]"), n_item("b", "Same text [[gold:4]]")]
    preds = run(make_config(server, tmp_path, cache_dir=None), twins)
    assert len(server.records) == 1
    assert preds["a"].prediction == preds["b"].prediction == "4"


def test_no_cache_dir_disables_caching(server: ChatServer, tmp_path: Path) -> None:
    config = make_config(server, tmp_path, cache_dir=None)
    run(config, gold_items(2))
    run(config, gold_items(2))
    assert len(server.records) == 4


# --- resume after kill -9 --------------------------------------------------------------------
def test_resume_after_sigkill_sends_no_answered_request_twice(server: ChatServer,
                                                              tmp_path: Path) -> None:
    items = [*gold_items(16), *(p_item(f"p{i}", ["A", "B", "C"]) for i in range(4))]
    total_requests = 16 + 4 * 3
    config = make_config(server, tmp_path, concurrency=4, timeout_s=60.0)
    argv, env, hanging = kill_when_stalled(server, tmp_path, config, items, 10)
    hung = {r.key for r in hanging}  # in flight at the kill, never answered
    answered_before = len(server.ok_records())
    assert 10 <= answered_before < total_requests
    assert not (tmp_path / "out.json").exists()
    for entry in cache_files(config):  # no torn entries
        assert entry.request is not None and fingerprint(entry.request) == entry.key

    server.hang_after = None
    subprocess.run(argv, env=env, check=True, stderr=subprocess.DEVNULL, timeout=120)
    out = json.loads((tmp_path / "out.json").read_text())
    assert {pid: status for pid, (status, _) in out.items()} == {it.problem_id: "ok"
                                                                 for it in items}
    assert all(out[f"n{i}"][1] == str(i * 7) for i in range(16))
    assert all(len(out[f"p{i}"][1]) == 3 for i in range(4))
    answered = server.answered()
    assert len(answered) == total_requests  # every distinct request answered...
    assert set(answered.values()) == {1}  # ...exactly once over both runs
    assert len(hung) == 4 and hung <= set(answered)  # ...including those cut off by the kill


# --- the API key -----------------------------------------------------------------------------
def test_api_key_never_written_anywhere(server: ChatServer, tmp_path: Path,
                                        capfd: pytest.CaptureFixture[str]) -> None:
    items = [n_item("echo", "Echo my credentials [[echo_auth]]"),
             n_item("dead", "[[fail:500:*]]"), p_item("p", ["A", "B [[fail:502:*]]"]),
             *gold_items(2)]
    config = make_config(server, tmp_path, max_retries=1)
    predictor = OpenAIPredictor(backend_section("openai", config))
    preds = predictor.predict(items)
    assert server.records[0].headers["authorization"] == f"Bearer {SECRET}"  # it was used
    by_id = {p.problem_id: p for p in preds}
    assert by_id["echo"].status == "error" and "[REDACTED]" in by_id["echo"].error
    dumped = json.dumps([asdict(p) for p in preds]) + json.dumps(predictor.identity())
    files = cache_text(tmp_path / "cache")
    captured = capfd.readouterr()
    for text in (dumped, files, captured.out, captured.err):
        assert SECRET not in text and SECRET[8:20] not in text


def test_redactor_masks_key_and_token_shapes() -> None:
    redact = Redactor(SECRET)
    assert SECRET not in redact(f"bad key {SECRET}; header Bearer {SECRET}")
    assert redact("Incorrect API key provided: sk-abc***wxyz") == (
        "Incorrect API key provided: [REDACTED]")


def test_missing_key_for_remote_server_is_an_error(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.delenv(KEY_ENV)
    predictor = OpenAIPredictor(backend_section(
        "openai", base_url="https://api.example.com/v1", model="m", api_key_env=KEY_ENV,
        cache_dir=str(tmp_path)))
    with pytest.raises(StageError, match=KEY_ENV):
        predictor.predict([n_item("a", "x")])


def test_missing_key_for_local_server_uses_a_dummy(server: ChatServer, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    preds = run(make_config(server, tmp_path), [n_item("a", "[[gold:3]]")])
    assert preds["a"].prediction == "3"
    assert server.records[0].headers["authorization"] == "Bearer EMPTY"


@pytest.mark.parametrize(("override", "message"), [
    ({"temprature": 0.1}, r"predict\.openai\.temprature: unknown key"),
    ({"model": None}, "model"),
    ({"base_url": "http://user:pw@127.0.0.1:1/v1"}, "credentials"),
    ({"base_url": "ftp://x"}, "http"),
    ({"n": 1}, "predict.samples"),
    ({"max_completion_tokens": -1}, "max_completion_tokens"),
    ({"reasoning_effort": 3}, "reasoning_effort"),
    ({"think_split": {"enabled": "yes"}}, "think_split"),
    ({"think_split": {"close": ""}}, "think_split"),
    ({"price_per_mtok": {"input": 1.0}}, "price_per_mtok"),
    ({"concurrency": 0}, "concurrency"),
])
def test_bad_config_is_rejected(server: ChatServer, tmp_path: Path, override: dict[str, Any],
                                message: str) -> None:
    with pytest.raises(StageError, match=message):
        OpenAIPredictor(backend_section("openai", make_config(server, tmp_path, **override)))


# --- prompt templates ------------------------------------------------------------------------
def test_templates_render_in_one_pass_and_are_fingerprinted() -> None:
    from rimo_eval.io.hashing import sha256_file
    from rimo_eval.predictors.prompting import rimo_n_messages, rimo_p_messages, template_hashes

    tricky = n_item("t", r"Find $\{x\}$ with {{problem}} and {{index}} literally.")
    assert rimo_n_messages(tricky)[0]["content"].count("{{problem}}") == 1
    item = p_item("p", ["First {{solution}}.", "Second."])
    text = rimo_p_messages(item, 1, ["proof {{index}}"])[0]["content"]
    assert "First {{solution}}." in text and "proof {{index}}" in text
    prompts = Path(__file__).resolve().parents[2] / "rimo_eval" / "prompts"
    # judge_*.txt belong to the judge stage, whose own fingerprint holds them (test_judge.py)
    assert template_hashes() == {p.name: sha256_file(p) for p in sorted(prompts.glob("*.txt"))
                                 if not p.name.startswith("judge_")}
    with pytest.raises(ValueError):
        rimo_p_messages(item, 1, [])


def test_fresh_runs_give_byte_identical_predictions(server: ChatServer, tmp_path: Path) -> None:
    """Same inputs and params, cold caches, different latencies: the same Parquet bytes."""
    from rimo_eval.artifacts.predictions import predictions_path
    from rimo_eval.predict import predict
    from tests.support.factories import n_item as n_row
    from tests.support.factories import p_item as p_row
    from tests.support.factories import predict_section, write_items
    write_items(tmp_path / "items", [n_row("2001a1", "12"), n_row("2001a2", "5")],
                [p_row("2001g1", ["g1", "g2"])])
    outputs = []
    for run_no, latency in enumerate((0.0, 0.05)):
        server.latency_s = latency
        cfg = make_config(server, tmp_path, cache_dir=str(tmp_path / f"cache{run_no}"))
        predict(predict_section({"backend": "openai", "openai": cfg}), tmp_path / "items",
                tmp_path / f"preds{run_no}")
        outputs.append([predictions_path(t, tmp_path / f"preds{run_no}").read_bytes()
                        for t in (TRACK_N, TRACK_P)])
    assert outputs[0] == outputs[1]
