"""The openai transport's HTTP path (``rimo_eval.chat.openai.http``: aiohttp, raising the engine's
own errors) against the loopback chat server: a failed request is an ``HTTPStatusError`` with
the server's status, message and ``Retry-After``, classified once (``errors.classify``); a run,
clean or failing, loads neither ``openai`` nor ``httpx2``; the proxy the environment names is
honoured; and the response cache's batched fsync leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rimo_eval.chat.cache import DB_NAME, ResponseCache
from rimo_eval.chat.errors import (
    ConnectionFailed,
    HTTPStatusError,
    MalformedResponse,
    RequestTimeout,
    classify,
)
from rimo_eval.chat.openai.http import OpenAIHTTP, _env_proxy
from rimo_eval.chat.probe import connection_cause
from tests.support.chat_server import ChatServer

ROOT = Path(__file__).resolve().parents[2]


def post(base_url: str, prompt: str, key: str = "sk-test") -> tuple[object, float]:
    async def go() -> tuple[object, float]:
        http = OpenAIHTTP(base_url, key, timeout_s=10.0, connect_s=5.0, connections=2)
        try:
            body = {"model": "fake", "messages": [{"role": "user", "content": prompt}]}
            return await http.post_json("/chat/completions", body)
        finally:
            await http.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(("code", "retried"), [(400, False), (401, False), (404, False),
                                               (422, False), (408, True), (409, True),
                                               (429, True), (500, True), (503, True)])
def test_a_status_error_is_the_engines_own_and_classified(server: ChatServer, code: int,
                                                          retried: bool) -> None:
    with pytest.raises(HTTPStatusError) as got:
        post(server.base_url, f"Compute. [[fail:{code}:*]]")
    assert got.value.status == code
    assert got.value.message == f"injected {code}"
    assert str(got.value) == f"HTTP {code}: injected {code}"
    assert classify(got.value).retryable is retried


def test_the_error_object_and_retry_after_are_read() -> None:
    body = json.dumps({"error": {"message": "slow down", "code": "rate_limit",
                                 "param": None}}).encode()
    err = HTTPStatusError(429, body, {"retry-after": "7"})
    assert (err.message, err.code, err.param, err.retry_after_s) == ("slow down", "rate_limit",
                                                                     None, 7.0)
    assert (classify(err).retryable, classify(err).retry_after_s) == (True, 7.0)
    bare = HTTPStatusError(400, b"plain text, not JSON", {"retry-after": "Wed, 21 Oct"})
    assert (bare.message, bare.retry_after_s) == ("plain text, not JSON", None)
    assert (classify(bare).retryable, classify(bare).retry_after_s) == (False, None)
    assert HTTPStatusError(429, b"", {"retry-after-ms": "1500"}).retry_after_s == 1.5
    assert HTTPStatusError(422, json.dumps({"error": "bad 'seed'"}).encode(), {}).message == \
        "bad 'seed'"
    assert classify(MalformedResponse("x")).retryable and classify(RequestTimeout("t")).retryable
    assert not classify(ValueError("a bug")).retryable


def test_a_reply_is_the_decoded_body_and_its_latency(server: ChatServer) -> None:
    server.latency_s = 0.05
    data, latency = post(server.base_url, "Compute. [[gold:7]]")
    assert data["choices"][0]["message"]["content"].endswith("\\boxed{7}.")  # type: ignore[index]
    assert latency >= 0.05
    sent = server.records[-1]
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["content-type"] == "application/json"


def test_a_refused_connection_keeps_its_cause() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ConnectionFailed) as got:
        post(base_url, "Compute.")
    assert not isinstance(got.value, RequestTimeout)
    assert connection_cause(got.value, base_url) == (
        f"connection refused at {base_url}: is the server running?")


@pytest.mark.serial  # connects within a 0.3 s limit
def test_a_hung_server_is_a_timeout(server: ChatServer) -> None:
    server.hang_s = 5.0

    async def go() -> None:
        http = OpenAIHTTP(server.base_url, "k", timeout_s=0.3, connect_s=0.3, connections=1)
        try:
            await http.post_json("/chat/completions", {"model": "fake", "messages": [
                {"role": "user", "content": "Compute. [[hang:1]]"}]})
        finally:
            await http.aclose()

    with pytest.raises(RequestTimeout):
        asyncio.run(go())


def test_the_environment_proxy_is_honoured_and_no_proxy_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                 "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert _env_proxy("https://api.example.com/v1") == (None, None)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    proxy, _ = _env_proxy("https://api.example.com/v1")
    assert str(proxy) == "http://proxy.internal:3128"
    assert _env_proxy("http://127.0.0.1:8000/v1") == (None, None)


CLEAN_RUN = """
import json, sys
from rimo_eval.artifacts.items import Item
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from tests.support.chat_server import ChatServer
from tests.support.factories import backend_section

server = ChatServer().start()
faults = ["", "[[fail:429:1]]", "[[fail:503:1]]", "[[empty:1]]", "[[malformed:1]]",
          "[[fail:400:*]]"]  # the first failure of a run used to import openai on the loop
items = [Item("RIMO-N", f"n{i}", f"Compute {i}. [[gold:{i}]] {f}", "algebra", 1, True,
              f"h{i}", answer=str(i)) for i, f in enumerate(faults)]
preds = OpenAIPredictor(backend_section(
    "openai", base_url=server.base_url, model="fake", api_key_env=None, cache_dir=sys.argv[1],
    concurrency=3, backoff_initial_s=0.01, backoff_max_s=0.02)).predict(items)
print(json.dumps({"statuses": [p.status for p in preds],
                  "loaded": sorted(m for m in ("openai", "httpx2") if m in sys.modules)}))
"""


def test_no_run_loads_the_official_client_not_even_a_failing_one(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", CLEAN_RUN, str(tmp_path / "cache")],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"statuses": ["ok"] * 5 + ["error"], "loaded": []}


def test_batched_fsync_covers_every_entry_once(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    for i in range(5):
        cache.put(f"{i:02d}" * 32, {"q": i}, {"texts": [str(i)]})
    written = cache.take_unsynced()
    assert written == [f"{i:02d}" * 32 for i in range(5)]
    cache.sync(written)
    assert cache.take_unsynced() == []  # nothing left to sync, nothing synced twice
    assert [cache.get(f"{i:02d}" * 32, {"q": i}) for i in range(5)] == [
        {"texts": [str(i)]} for i in range(5)]
    assert {p.name for p in (tmp_path / "cache").iterdir()} <= {
        DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"}
