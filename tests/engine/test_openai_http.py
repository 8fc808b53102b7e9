"""The openai backend's own HTTP path (``openai_http``: aiohttp with the official client's
errors) against the loopback chat server: a failed request raises exactly what the official
client raises for it, a clean run loads neither ``openai`` nor ``httpx2``, the proxy the
environment names is honoured, and the response cache's batched fsync leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from stages.predictors.cache import ResponseCache
from stages.predictors.openai_http import OpenAIHTTP, _env_proxy
from stages.predictors.probe import connection_cause
from tests.chat_server import ChatServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    srv = ChatServer().start()
    yield srv
    srv.stop()


def post(base_url: str, prompt: str, key: str = "sk-test") -> tuple[object, float]:
    async def go() -> tuple[object, float]:
        http = OpenAIHTTP(base_url, key, timeout_s=10.0, connect_s=5.0, connections=2)
        try:
            body = {"model": "fake", "messages": [{"role": "user", "content": prompt}]}
            return await http.post_json("/chat/completions", body)
        finally:
            await http.aclose()

    return asyncio.run(go())


def official(base_url: str, prompt: str) -> BaseException:
    """What ``AsyncOpenAI.chat.completions.create`` raises for the same request."""
    async def go() -> BaseException:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=base_url, max_retries=0)
        try:
            await client.chat.completions.create(
                model="fake", messages=[{"role": "user", "content": prompt}])
        except openai.OpenAIError as exc:
            return exc
        finally:
            await client.close()
        raise AssertionError("the official client did not raise")

    return asyncio.run(go())


@pytest.mark.parametrize("code", [400, 401, 404, 422, 429, 500, 503])
def test_a_status_error_is_the_official_clients_own(server: ChatServer, code: int) -> None:
    prompt = f"Compute. [[fail:{code}:*]]"
    want = official(server.base_url, prompt)
    with pytest.raises(openai.APIStatusError) as got:
        post(server.base_url, prompt)
    assert type(got.value) is type(want)
    assert str(got.value) == str(want) == f"Error code: {code} - injected {code}"
    assert got.value.status_code == code
    assert got.value.body == want.body  # type: ignore[attr-defined]
    assert got.value.response.headers["content-type"] == "application/json"


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
    with pytest.raises(openai.APIConnectionError) as got:
        post(base_url, "Compute.")
    assert not isinstance(got.value, openai.APITimeoutError)
    assert connection_cause(got.value, base_url) == (
        f"connection refused at {base_url}: is the server running?")


def test_a_hung_server_is_the_official_timeout(server: ChatServer) -> None:
    server.hang_s = 5.0

    async def go() -> None:
        http = OpenAIHTTP(server.base_url, "k", timeout_s=0.3, connect_s=0.3, connections=1)
        try:
            await http.post_json("/chat/completions", {"model": "fake", "messages": [
                {"role": "user", "content": "Compute. [[hang:1]]"}]})
        finally:
            await http.aclose()

    with pytest.raises(openai.APITimeoutError):
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
from stages.core.items import Item
from stages.predictors.openai_chat import OpenAIPredictor
from tests.chat_server import ChatServer

server = ChatServer().start()
items = [Item("RIMO-N", f"n{i}", f"Compute {i}. [[gold:{i}]]", "algebra", 1, True, f"h{i}",
              answer=str(i)) for i in range(6)]
preds = OpenAIPredictor({"base_url": server.base_url, "model": "fake", "api_key_env": None,
                         "cache_dir": sys.argv[1], "concurrency": 3}).predict(items)
print(json.dumps({"statuses": [p.status for p in preds],
                  "loaded": sorted(m for m in ("openai", "httpx2") if m in sys.modules)}))
"""


def test_a_clean_run_never_loads_the_official_client(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", CLEAN_RUN, str(tmp_path / "cache")],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"statuses": ["ok"] * 6, "loaded": []}


def test_batched_fsync_covers_every_entry_once(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    for i in range(5):
        cache.put(f"{i:02d}" * 32, {"q": i}, {"texts": [str(i)]})
    written = cache.take_unsynced()
    assert sorted(p.name for p in written) == sorted(f"{f'{i:02d}' * 32}.json" for i in range(5))
    cache.sync(written)
    assert cache.take_unsynced() == []  # nothing left to sync, nothing synced twice
    assert [cache.get(f"{i:02d}" * 32, {"q": i}) for i in range(5)] == [
        {"texts": [str(i)]} for i in range(5)]
    assert not list((tmp_path / "cache").rglob(".*.tmp"))
