"""Redaction never changes what is graded without saying so (issue 28, section 2), through the
real engine: the openai backend against the loopback chat server, then score.

Local servers are started with keys like ``x``, ``none``, ``sk-local`` or ``token``. Cutting such
a key out of the replies turned every ``\\boxed{7}`` into ``\\bo[REDACTED]ed{7}`` and the
accuracy into 0, silently. Now only a key that looks like a secret (``redact.looks_secret``) is
cut out of model text, a shorter one is announced once and left alone, and a reply that
redaction did change is flagged ``redacted`` and counted. Errors and logs lose any key
(tests/engine/test_secrets.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rimo_eval.chat import redact
from rimo_eval.chat.redact import Redactor, looks_secret
from rimo_eval.io.hashing import fingerprint
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.stage import score
from tests.support.chat_server import ChatServer
from tests.support.factories import predict_section, section, write_items

KEY_ENV = "RIMO_REDACTION_TEST_KEY"
LONG_KEY = "sk-rimo-redact-4c8e1f0a9b7d2e63"
ECHO = "[[echo_key_in_reply]]"  # the responder quotes the key in that item's reply
BOOT = section(ScoreParams, "score", bootstrap={"samples": 50, "seed": 0, "confidence": 0.95})


def n_row(pid: str, gold: str, extra: str = "") -> dict[str, Any]:
    row = {"track": TRACK_N, "problem_id": pid, "problem": f"Compute {pid}. [[gold:{gold}]]{extra}",
           "domain": "algebra", "number_of_parts": 1, "gradable": True,
           "ungradable_reason": None, "solution": "Because.", "answer": gold}
    return {**row, "content_hash": fingerprint(row)}


def p_row(pid: str, extra: str = "") -> dict[str, Any]:
    row = {"track": TRACK_P, "problem_id": pid, "problem": f"Prove {pid}.{extra}",
           "domain": None, "number_of_parts": 2, "gradable": True, "ungradable_reason": None,
           "sub_problems": [f"{pid} part 1", f"{pid} part 2"],
           "sub_solutions": ["Let x = 1, so x^2 = 1.", "Hence x + x = 2."]}
    return {**row, "content_hash": fingerprint(row)}


def responder(key: str | None) -> Any:
    """RIMO-P parts are answered with their reference (text full of x), RIMO-N items by the
    server's "Working through it carefully, the answer is \\boxed{gold}."; an ``ECHO`` item's
    reply quotes ``key`` before its answer."""
    def reply(body: dict[str, Any], prompt: str) -> str | None:
        gold = re.search(r"\[\[gold:([^\]]*)\]\]", prompt)
        if "Now prove Part 1 " in prompt:
            text = "Let x = 1, so x^2 = 1."
        elif "Now prove Part 2 " in prompt:
            text = "Hence x + x = 2."
        elif key and ECHO in prompt and gold:
            text = f"The answer is \\boxed{{{gold.group(1)}}}."
        else:
            return None
        return f"Your key is {key}. {text}" if key and ECHO in prompt else text
    return reply


def run(root: Path, server: ChatServer, monkeypatch: pytest.MonkeyPatch, key: str | None,
        echo: bool = False) -> dict[str, Any]:
    """Predict and score 6 RIMO-N and 2 RIMO-P items, every one right, with ``key`` in
    ``KEY_ENV`` (None: unset, so the dummy key goes)."""
    if key is None:
        monkeypatch.delenv(KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(KEY_ENV, key)
    server.responder = responder(key if echo else None)
    mark = f" {ECHO}" if echo else ""
    write_items(root / "items", [n_row(f"n{i}", str(i * 7), mark if i == 3 else "")
                                 for i in range(6)],
                [p_row("p0", mark), p_row("p1")])
    cfg = {"backend": "openai", "limit": None,
           "openai": {"base_url": server.base_url, "model": "fake-model", "api_key_env": KEY_ENV,
                      "cache_dir": str(root / "cache"), "timeout_s": 30.0, "max_retries": 1,
                      "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4}}
    predict(predict_section(cfg), root / "items", root / "preds")
    return score(BOOT, root / "items", root / "preds", root / "scores", root / "metrics.json",
                 root / "plots")


def tracks(metrics: dict[str, Any]) -> dict[str, Any]:
    return {t: metrics[t] for t in (TRACK_N, TRACK_P)}


@pytest.mark.chat_server(hang_s=60.0)
@pytest.mark.parametrize("key", ["x", "sk-local"])
def test_metrics_with_a_short_key_equal_the_metrics_without_one(
        server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    without = run(tmp_path / "without", server, monkeypatch, None)
    assert without[TRACK_N]["accuracy"] == 1.0 and without[TRACK_P]["strict"] == 1.0
    assert {r.headers["authorization"] for r in server.records} == {"Bearer EMPTY"}
    server.reset()
    with_key = run(tmp_path / "with", server, monkeypatch, key)
    assert {r.headers["authorization"] for r in server.records} == {f"Bearer {key}"}
    assert tracks(with_key) == tracks(without)
    assert with_key[TRACK_N]["diagnostics"]["redacted"] == 0
    assert with_key[TRACK_P]["diagnostics"]["redacted"] == 0


@pytest.mark.chat_server(hang_s=60.0)
def test_a_short_key_is_announced_once_and_never_printed(
        server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(redact, "_warned", set())
    key = "l0cal-k3y"
    run(tmp_path / "a", server, monkeypatch, key)
    run(tmp_path / "b", server, monkeypatch, key)  # the same process: said once
    out = capfd.readouterr()
    said = [line for line in out.err.splitlines() if "too short or too repetitive" in line]
    assert len(said) == 1, out.err
    assert f"{KEY_ENV} (predict.openai.api_key_env)" in said[0]
    assert key not in out.err and key not in out.out


@pytest.mark.chat_server(hang_s=60.0)
def test_a_reply_redaction_changed_is_flagged_and_counted(
        server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """A real secret echoed by the server is still cut out, and the reply says so."""
    metrics = run(tmp_path, server, monkeypatch, LONG_KEY, echo=True)
    assert metrics[TRACK_N]["diagnostics"]["redacted"] == 1
    assert metrics[TRACK_P]["diagnostics"]["redacted"] == 1
    assert metrics[TRACK_N]["accuracy"] == 1.0  # the box was not where the key was
    assert metrics[TRACK_P]["strict"] == 0.5  # p0's parts now start with the masked key
    scores = pd.read_parquet(tmp_path / "scores/rimo_n.parquet").set_index("problem_id")
    assert scores.index[scores["redacted"]].tolist() == ["n3"]
    p_scores = pd.read_parquet(tmp_path / "scores/rimo_p.parquet").set_index("problem_id")
    assert p_scores.index[p_scores["redacted"]].tolist() == ["p0"]
    stored = (tmp_path / "preds/rimo_n.parquet").read_bytes() + \
        (tmp_path / "preds/rimo_p.parquet").read_bytes()
    assert LONG_KEY.encode() not in stored
    assert "too short" not in capfd.readouterr().err


def test_what_looks_like_a_secret() -> None:
    assert not any(looks_secret(k) for k in ("x", "none", "EMPTY", "sk-local", "token",
                                             "sk-no-key-required"[:15], "0" * 64, "ab" * 20))
    assert all(looks_secret(k) for k in (LONG_KEY, "sk-no-key-required",
                                         "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"))


def test_errors_lose_any_key_model_text_only_a_secret() -> None:
    short, long = Redactor("x"), Redactor(LONG_KEY)
    assert short("HTTP 400: bad key x, header Bearer x") == \
        "HTTP 400: bad key [REDACTED], header Bearer [REDACTED]"
    assert short.model_text("so \\boxed{x+1}") == "so \\boxed{x+1}"
    assert long.model_text(f"echo {LONG_KEY} \\boxed{{7}}") == "echo [REDACTED] \\boxed{7}"
    assert long.model_text("Bearer sk-abc1234 is a token-shaped word") == \
        "Bearer sk-abc1234 is a token-shaped word"
    assert LONG_KEY not in long(f"failed: {LONG_KEY}")
    assert Redactor("EMPTY")("EMPTY") == "EMPTY" and Redactor("")("x") == "x"
