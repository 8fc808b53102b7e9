"""The native backends through the predict stage: the metrics of a run against each fake
(tests/support/fake_anthropic.py, tests/support/fake_gemini.py, through the real SDKs) equal
those of the same fake model served through the ``openai`` backend (tests/support/chat_server.py),
and a ``python -m rimo_eval predict`` process killed with SIGKILL resumes with nothing re-sent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rimo_eval.io.hashing import fingerprint
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.stage import score
from tests.support.chat_server import ChatServer
from tests.support.factories import predict_section, write_items
from tests.support.factories import section as typed_section
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_gemini import FakeGemini
from tests.support.fake_provider import FakeProvider
from tests.support.paths import REPO_ROOT
from tests.support.predict_faults import gold_reply, predictions

KEY_ENV = "RIMO_NATIVE_STAGE_TEST_UNSET_KEY"  # unset: loopback servers get the dummy key
FAKES: dict[str, type[FakeProvider]] = {"anthropic": FakeAnthropic, "gemini": FakeGemini}


def _row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "content_hash": fingerprint(row)}


def build_items(n: int = 24, p: int = 8) -> tuple[list[dict], list[dict]]:
    """RIMO-N: right, wrong, unboxed, truncated and transiently failing replies; RIMO-P: 1-3
    parts, some references the model does not reproduce."""
    n_rows = []
    for i in range(n):
        gold = str((i * 37) % 1000)
        boxed = "" if i % 7 == 3 else f"[[gold:{gold}]]"
        extra = {5: "[[truncate]]", 8: "[[fail:429:1]]", 11: "[[fail:500:2]]",
                 14: "[[malformed:1]]"}.get(i, "")
        answer = str(int(gold) + 1) if i % 4 == 1 else gold
        n_rows.append(_row({
            "track": TRACK_N, "problem_id": f"n{i:03d}",
            "problem": f"Quantity {i}: compute it. {boxed} {extra}".strip(),
            "domain": "algebra", "number_of_parts": 1, "gradable": True,
            "ungradable_reason": None, "solution": "Because.", "answer": answer}))
    p_rows = []
    for j in range(p):
        pid, parts = f"q{j:02d}", 1 + j % 3
        subs = [f"Claim {k + 1} of {pid}. [[gold:{pid}.{k + 1}]]" for k in range(parts)]
        sols = [("an unrelated proof" if j % 3 == 0 and k == parts - 1
                 else gold_reply(f"{pid}.{k + 1}")) for k in range(parts)]
        p_rows.append(_row({
            "track": TRACK_P, "problem_id": pid, "problem": f"Prove the claims of {pid}.",
            "domain": None, "number_of_parts": parts, "gradable": True,
            "ungradable_reason": None, "sub_problems": subs, "sub_solutions": sols}))
    return n_rows, p_rows


def section(backend: str, base_url: str, cache_dir: Path, **extra: Any) -> dict[str, Any]:
    """The full predict.<backend> section of params.yaml with this test's overrides."""
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    return {**params["predict"][backend], "base_url": base_url, "model": "fake",
            "api_key_env": KEY_ENV, "cache_dir": str(cache_dir), "timeout_s": 5.0,
            "max_retries": 3, "backoff_initial_s": 0.01, "backoff_max_s": 0.05,
            "concurrency": 2, **extra}


def predict_cfg(backend: str, sec: dict[str, Any]) -> dict[str, Any]:
    return {"backend": backend, "limit": None, "sample_seed": 0, backend: sec}


def metrics_of(root: Path, items_dir: Path, preds_dir: Path) -> dict[str, Any]:
    metrics = score(typed_section(ScoreParams, "score",
                            bootstrap={"samples": 200, "seed": 0, "confidence": 0.95}),
                    items_dir=items_dir, preds_dir=preds_dir, scores_dir=root / "scores",
                    metrics_path=root / "metrics.json", plots_dir=root / "plots")
    out = {k: v for k, v in metrics.items() if k != "provenance"}
    for track in (TRACK_N, TRACK_P):  # token counts are each fake's own; truncation is not
        usage = out[track].pop("usage")
        out[track]["truncated"] = usage["truncated"]
    return out


@pytest.fixture
def items_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # score's provenance asks git about the cwd
    d = tmp_path / "work" / "data" / "items"
    write_items(d, *build_items())
    return d


def test_metrics_equal_the_openai_backends(items_dir: Path, tmp_path: Path) -> None:
    server = ChatServer().start()
    try:
        ref = tmp_path / "openai"
        predict(predict_section(predict_cfg("openai", section("openai", server.base_url,
                                                              ref / "cache"))),
                items_dir, ref / "preds")
        expected = metrics_of(ref, items_dir, ref / "preds")
    finally:
        server.stop()
    assert 0 < expected[TRACK_N]["accuracy"] < 1 and expected[TRACK_N]["truncated"] == 1
    assert 0 < expected[TRACK_P]["strict"] < 1
    for backend, cls in FAKES.items():
        with cls(retry_after="0") as fake:
            out = tmp_path / backend
            predict(predict_section(predict_cfg(backend, section(backend, fake.base_url,
                                                                 out / "cache"))),
                    items_dir, out / "preds")
            assert metrics_of(out, items_dir, out / "preds") == expected, backend
            assert {r.outcome for r in fake.records} >= {"ok", "http-429", "http-500",
                                                          "malformed"}


class Stage:
    def __init__(self, workdir: Path, params: Path, index: int) -> None:
        env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
        self.log = workdir / f"stage-{index}.log"
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rimo_eval", "--params", str(params), "predict"],
                cwd=workdir, env=env, stdout=fh, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@pytest.fixture(params=sorted(FAKES))
def slow_fake(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeProvider]]:
    with FAKES[request.param](latency_s=0.05, retry_after="0") as fake:
        yield request.param, fake


@pytest.mark.serial  # a kill after 10 of ~45 replies, polled: not beside other tests
def test_kill_9_and_resume_sends_nothing_twice(slow_fake: tuple[str, FakeProvider],
                                               items_dir: Path, tmp_path: Path) -> None:
    backend, fake = slow_fake
    ref = tmp_path / "ref"
    predict(predict_section(predict_cfg(backend, section(backend, fake.base_url, ref / "cache"))),
            items_dir, ref / "preds")
    expected = predictions(ref / "preds")
    fake.reset()
    work = tmp_path / "work"
    full = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    full["predict"] = predict_cfg(backend, section(backend, fake.base_url, work / "cache"))
    params = work / "params.yaml"
    params.write_text(yaml.safe_dump(full))
    stage = Stage(work, params, 1)
    try:
        deadline = time.monotonic() + 60
        while len(fake.ok_records()) < 10:  # well inside the ~45 requests of the run
            assert stage.proc.poll() is None, stage.text()[-3000:]
            assert time.monotonic() < deadline, "timed out waiting for 10 replies"
            time.sleep(0.005)
        os.kill(stage.proc.pid, signal.SIGKILL)
        assert stage.proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if stage.proc.poll() is None:
            stage.proc.kill()
            stage.proc.wait(timeout=10)
    time.sleep(0.1)
    before = len(fake.ok_records())
    assert not (work / "data" / "predictions").exists()  # nothing half-written
    second = Stage(work, params, 2)
    assert second.proc.wait(timeout=120) == 0, second.text()[-3000:]
    assert len(fake.ok_records()) > before  # the rest was asked for ...
    twice = {k: n for k, n in fake.answered().items() if n > 1}
    # ... and nothing answered before the kill was sent again (a reply in flight at the kill,
    # answered but never cached, is the only thing a resume may ask twice).
    assert len(twice) <= 2, twice
    assert Counter(v[0] for v in predictions(work / "data" / "predictions").values()) == \
        Counter(v[0] for v in expected.values())
    assert predictions(work / "data" / "predictions") == expected


@pytest.mark.parametrize("backend", sorted(FAKES))
def test_estimate_sends_nothing_needs_no_key_and_sees_the_cache(
        backend: str, items_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    from rimo_eval.predict import estimate

    cap = {"anthropic": {"max_tokens": 2000}, "gemini": {"max_output_tokens": 2000}}[backend]
    with FAKES[backend](retry_after="0") as fake:
        sec = section(backend, fake.base_url, tmp_path / "cache", **cap,
                      price_per_mtok={"input": 3, "output": 15})
        # A remote-looking URL with no key set: a real run would stop; the estimate sends
        # nothing, so it needs none.
        remote = {**sec, "base_url": "https://api.example.invalid"}
        cold = estimate(predict_section(predict_cfg(backend, remote)), items_dir)
        assert "0 already cached" in cold and "2000 tokens each" in cold
        assert "estimated input cost" in cold and "output at most" in cold
        assert fake.records == []
        predict(predict_section(predict_cfg(backend, sec)), items_dir, tmp_path / "preds")
        sent = len(fake.records)
        warm = estimate(predict_section(predict_cfg(backend, sec)), items_dir)
        assert len(fake.records) == sent
    total = next(line for line in warm.splitlines() if line.strip().startswith("total:"))
    assert ", 0 to send" in total, warm
