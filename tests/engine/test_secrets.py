"""The API key reaches the server and nothing else: a full ``dvc repro`` with the openai backend.

A recognisable random key is put in the variable named by ``predict.openai.api_key_env``; a
loopback chat server records the Authorization header of every request (proving the key was
really sent) and, for the first distinct prompts, quotes the credentials back in every place a
server can: a 400 error message, a 503 error message (retried, then recorded), the reply text,
and the reply's ``model`` / ``id`` / ``system_fingerprint`` fields. Afterwards no file under the
repo (work tree, artifacts, response cache, ``dvc.lock``, ``.dvc/``, report notebook and HTML,
every git object once the results are committed, Parquet columns decoded) and neither stream
of the captured ``dvc repro`` output holds the key, its random part, or its URL-encoded,
hex or base64 forms (base64 at all three byte alignments).
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from rimo_eval.chat.cache import DB_NAME
from rimo_eval.predict import predict
from tests.support.cache_tools import cache_entries, cache_text
from tests.support.chat_server import (
    ChatServer,
    Record,
    prompt_text,
    request_fingerprint,
)
from tests.support.factories import predict_section, small_benchmark
from tests.support.key_forms import key_forms
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import make_repo, sh

KEY_ENV = "RIMO_SECRETS_TEST_API_KEY"


def make_key() -> str:
    return f"sk-rimo-SECRET-{secrets.token_hex(16)}"


# --- what counts as the key ------------------------------------------------------------------
def _parquet_text(path: Path) -> bytes | None:
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError):
        return None
    return json.dumps(table.to_pylist(), default=str, ensure_ascii=False).encode()


def find_leaks(root: Path, key: str, extra: dict[str, str] | None = None) -> list[str]:
    """Every place under ``root`` (and in ``extra`` texts) holding a form of ``key``."""
    forms = key_forms(key)
    blobs: list[tuple[str, bytes]] = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        where = path.relative_to(root).as_posix()
        blobs.append((where, data))
        if data[:4] == b"PAR1":  # compressed columns: look at the decoded values too
            decoded = _parquet_text(path)
            assert decoded is not None, f"{where}: unreadable Parquet"
            blobs.append((f"{where} (decoded)", decoded))
        if path.name == DB_NAME:  # compressed entries: look at them decoded too
            blobs.append((f"{where} (decoded)", cache_text(path.parent).encode()))
    if (root / ".git").is_dir():  # loose objects are zlib-compressed, packs delta-encoded
        objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"],
                                 cwd=root, capture_output=True, check=True, timeout=60).stdout
        blobs.append(("git objects", objects))
    blobs += [(name, text.encode()) for name, text in (extra or {}).items()]
    return [f"{where}: {form}" for where, data in blobs
            for form, needle in forms.items() if needle in data]


# --- a server that tries to leak the key -----------------------------------------------------
@dataclass
class LeakyServer(ChatServer):
    """The first distinct prompts each get one way of quoting the credentials back (in the
    order of ``leak_modes``); the rest are ordinary ChatServer replies. Every request's headers
    are recorded.

    echo-400:    HTTP 400 whose message quotes the Authorization header (not retried)
    echo-503:    HTTP 503 quoting the key, every attempt (retried, then recorded as an error)
    echo-reply:  a reply whose text quotes the header and boxes the key (the "answer")
    echo-fields: an ordinary reply whose ``model``, ``id``, ``system_fingerprint`` and
                 ``finish_reason`` are the key
    """

    leak_modes: tuple[str, ...] = ("echo-400", "echo-503", "echo-reply")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.modes: dict[str, str] = {}

    def mode_for(self, body: Any) -> str | None:
        if not isinstance(body, dict):
            return None
        prompt = prompt_text(body)
        with self._lock:
            if prompt not in self.modes:
                n = len(self.modes)
                self.modes[prompt] = self.leak_modes[n] if n < len(self.leak_modes) else "normal"
            mode = self.modes[prompt]
        return None if mode == "normal" else mode

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self
        base: Any = super().handler()

        class Handler(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                body, headers = self._read_request()
                mode = server.mode_for(body)
                if mode is None:  # the ordinary fake server's behaviour
                    self._serve(body, headers)
                    return
                rec = Record(body, request_fingerprint(body), prompt_text(body), headers,
                             time.monotonic())
                server._begin(rec)
                auth = headers.get("authorization", "")
                key = auth.removeprefix("Bearer ")
                if mode == "echo-400":
                    self._json(400, {"error": {"message": f"rejected credentials: {auth}",
                                               "type": "invalid_request_error"}})
                    server._finish(rec, "http-400")
                    return
                if mode == "echo-503":
                    self._json(503, {"error": {"message": f"overloaded for api key {key}; "
                                                          f"header was {auth!r}"}})
                    server._finish(rec, "http-503")
                    return
                text = (f"Your header was {auth}. \\boxed{{{key}}}" if mode == "echo-reply"
                        else "Nothing to see here. \\boxed{1}")
                echo = mode == "echo-fields"
                self._json(200, {
                    "id": f"chatcmpl-{key if echo else 'x'}", "object": "chat.completion",
                    "created": 0, "model": key if echo else "fake",
                    "system_fingerprint": key if echo else "fp",
                    "choices": [{"index": 0, "finish_reason": key if echo else "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                server._finish(rec, "ok", text)

        return Handler


@pytest.fixture
def leaky_server() -> Iterator[LeakyServer]:
    srv = LeakyServer(hang_s=5.0).start()
    yield srv
    srv.stop()


# --- the tests -------------------------------------------------------------------------------
def test_leak_finder_sees_every_hiding_place(tmp_path: Path) -> None:
    """The scan below is only evidence if it can find a planted key (and ignores a clean one)."""
    key, other = make_key(), make_key()
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "git", "init", "-q")
    (root / "clean.txt").write_text(f"a different key: {other}")
    pq.write_table(pa.table({"details": [json.dumps({"raw_text": f"x {key} y"})]}),
                   root / "preds.parquet", compression="zstd")
    (root / "url.log").write_text(f"GET /?auth={quote(f'Bearer {key}', safe='')}")
    committed = root / "committed.txt"
    committed.write_text("ab" + base64.b64encode(b"x" + key.encode()).decode())
    sh(root, "git", "add", "committed.txt")
    sh(root, "git", "commit", "-qm", "plant")
    committed.unlink()  # only the (zlib-compressed) git object still holds it
    (root / "tail.bin").write_bytes(b"\x00" + key.rsplit("-", 1)[1].encode())
    leaks = find_leaks(root, key, {"captured stderr": f"Bearer {key}"})
    where = {leak.split(": ")[0] for leak in leaks}
    # (A short Parquet value may also be stored verbatim, in the page or the statistics.)
    assert where - {"preds.parquet"} == {"preds.parquet (decoded)", "url.log", "git objects",
                                         "tail.bin", "captured stderr"}, leaks
    assert "git objects: base64 @1" in leaks
    assert not find_leaks(root, make_key())


@pytest.mark.slow
def test_api_key_only_reaches_the_server(tmp_path: Path, mirror_dir: Path,
                                         leaky_server: LeakyServer,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    key = make_key()
    monkeypatch.setenv(KEY_ENV, key)  # inherited by dvc and its stages through sh()
    defaults = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["predict"]["openai"]
    openai_cfg = {**defaults, "base_url": leaky_server.base_url, "model": "fake",
                  "api_key_env": KEY_ENV, "cache_dir": ".rimo_cache/responses",
                  "timeout_s": 10.0, "max_retries": 2, "backoff_initial_s": 0.01,
                  "backoff_max_s": 0.05, "concurrency": 4}
    repo = make_repo(tmp_path / "repo", mirror_dir,
                     {"backend": "openai", "limit": 3, "openai": openai_cfg,
                      "allow_errors": 0.5})  # two of the six items fail on purpose

    out = sh(repo, "dvc", "repro", timeout=300)
    # What a user would do next; it also puts the results into git objects.
    shown = sh(repo, "dvc", "metrics", "show")
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", "results")

    # The key really was used: every request carried it.
    records = list(leaky_server.records)
    assert records and {r.headers.get("authorization") for r in records} == {f"Bearer {key}"}
    assert set(leaky_server.modes.values()) >= set(leaky_server.leak_modes), leaky_server.modes
    assert sum(r.outcome == "http-503" for r in records) == 3  # retried, then recorded

    leaks = find_leaks(repo, key, {"dvc repro stdout": out.stdout, "dvc repro stderr": out.stderr,
                                   "dvc metrics show": shown.stdout + shown.stderr})
    assert not leaks, "the API key leaked:\n" + "\n".join(leaks)

    # ...and every leak attempt reached the artifacts in redacted form.
    tables = [pq.read_table(repo / f"data/predictions/rimo_{t}.parquet").to_pylist()
              for t in ("n", "p")]
    errors = [row["error"] for rows in tables for row in rows if row["status"] == "error"]
    assert len(errors) == 2 and all("[REDACTED]" in e for e in errors), errors
    echoed = [row for rows in tables for row in rows if "[REDACTED]" in str(row["prediction"])]
    assert len(echoed) == 1, "the echoed reply should be stored with the key masked"
    metrics = json.loads((repo / "reports/metrics.json").read_text(encoding="utf-8"))
    assert sum(metrics[t]["diagnostics"]["redacted"] for t in ("RIMO-N", "RIMO-P")) == 1
    assert (repo / ".rimo_cache/responses").is_dir()
    assert cache_entries(repo / ".rimo_cache/responses")
    for name in ("reports/report.html", "reports/report.ipynb", "dvc.lock",
                 "reports/metrics.json"):
        assert (repo / name).is_file(), name



def test_key_echoed_in_response_fields_is_not_stored(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    key = make_key()
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.chdir(tmp_path)
    small_benchmark(tmp_path / "items")
    defaults = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["predict"]["openai"]
    server = LeakyServer(leak_modes=("echo-fields",) * 100).start()
    try:
        openai_cfg = {**defaults, "base_url": server.base_url, "model": "fake",
                      "api_key_env": KEY_ENV, "cache_dir": str(tmp_path / "cache"),
                      "timeout_s": 10.0, "max_retries": 0, "concurrency": 4}
        predict(predict_section({"backend": "openai", "limit": None, "openai": openai_cfg}),
                tmp_path / "items", tmp_path / "preds")
        records = list(server.records)
    finally:
        server.stop()
    assert records and {r.headers.get("authorization") for r in records} == {f"Bearer {key}"}
    assert {r.outcome for r in records} == {"ok"}
    leaks = find_leaks(tmp_path, key)
    assert not leaks, "the API key leaked:\n" + "\n".join(leaks)


def test_a_short_key_reaches_no_error_log_or_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    """A key too short to be cut out of model text (rimo_eval.chat.redact.looks_secret) is still
    cut out of every error the server quotes it in, and no log, cache entry or table holds it
    (the server here never puts it in a reply's text, which would be kept as written)."""
    key = "l0c-k3y9q"  # 9 characters: not a secret by its looks
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.chdir(tmp_path)
    small_benchmark(tmp_path / "items")
    defaults = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["predict"]["openai"]
    server = LeakyServer(leak_modes=("echo-400", "echo-503", "echo-400")).start()
    try:
        openai_cfg = {**defaults, "base_url": server.base_url, "model": "fake",
                      "api_key_env": KEY_ENV, "cache_dir": str(tmp_path / "cache"),
                      "timeout_s": 10.0, "max_retries": 1, "backoff_initial_s": 0.01,
                      "backoff_max_s": 0.05, "concurrency": 4}
        predict(predict_section(backend="openai", limit=None, openai=openai_cfg,
                                allow_errors=0.5), tmp_path / "items", tmp_path / "preds")
        records = list(server.records)
    finally:
        server.stop()
    assert {r.headers.get("authorization") for r in records} == {f"Bearer {key}"}
    tables = [pq.read_table(tmp_path / f"preds/rimo_{t}.parquet").to_pylist() for t in "np"]
    errors = [row["error"] for rows in tables for row in rows if row["status"] == "error"]
    assert len(errors) == 3 and all("[REDACTED]" in e for e in errors), errors
    out = capfd.readouterr()
    leaks = find_leaks(tmp_path, key, {"stdout": out.out, "stderr": out.err})
    assert not leaks, "the API key leaked:\n" + "\n".join(leaks)
