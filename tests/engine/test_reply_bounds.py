"""Every reply bounded (issue 42 §3), through the real engine against loopback servers.

* In time: ``timeout_s`` is the deadline of the whole request. A server that trickles one byte
  a second (no read ever waits long) fails the request at its deadline, for the openai
  backend and the native SDK ones.
* In memory: a gzip bomb is read only up to ``max_reply_bytes`` decoded: that item's error
  (``reply_too_large``), not retried, the others kept. Peak RSS is measured in
  ``benchmarks/reply_bomb.py``, not here.
* In depth: JSON nested 100,000 deep (a reply, an error body) is that item's error
  (``json_too_deep``); the other replies are cached and a rerun sends only the bad one again.
* On the terminal: ESC sequences and other controls in a server's error text are printed as
  visible escapes, never raw (``rimo_eval.io.terminal``).
"""

from __future__ import annotations

import gzip
import json
import re
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from rimo_eval.artifacts.paths import predictions_path
from rimo_eval.cli import main as cli_main
from rimo_eval.io.terminal import for_terminal
from rimo_eval.predict import predict
from rimo_eval.predictors import create_predictor
from rimo_eval.rimo.tracks import TRACK_N
from tests.support.cache_tools import cache_entries
from tests.support.chat_server import ChatServer, Shaped
from tests.support.factories import backend_section, predict_section, write_items
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_gemini import FakeGemini
from tests.support.fake_provider import Reply
from tests.support.hostile_replies import Encoded, MiB, RawServer, Trickle, deep_json, gzip_bomb
from tests.support.paths import REPO_ROOT

TIMEOUT_S = 3.0
# The server sees the client leave at its next byte (1 s) or the one after; a loaded machine.
# The unbounded request lasted as long as its body: 600 bytes, ten minutes.
SLACK_S = 4.0
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
BAR = re.compile(r"\rpredict\[openai\]: [^\r\n]*\|[^\r\n]*req[^\r\n]*")


def n_rows(marks: list[str]) -> list[dict[str, Any]]:
    """One RIMO-N item per mark (gold i; the mark, if any, tells the server what to do)."""
    from rimo_eval.io.hashing import fingerprint

    out = []
    for i, mark in enumerate(marks):
        row = {"track": TRACK_N, "problem_id": f"n{i}",
               "problem": f"Compute {i}. [[gold:{i}]] {mark}".strip(), "domain": "algebra",
               "number_of_parts": 1, "gradable": True, "ungradable_reason": None,
               "solution": "Because.", "answer": str(i)}
        out.append({**row, "content_hash": fingerprint(row)})
    return out


def config(server: ChatServer, cache: Path, **openai: Any) -> dict[str, Any]:
    return {"backend": "openai", "limit": None, "allow_errors": 0.5,
            "openai": {"base_url": server.base_url, "model": "fake-model", "api_key_env": None,
                       "cache_dir": str(cache), "timeout_s": 30.0, "max_retries": 2,
                       "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4,
                       **openai}}


def rows(out: Path) -> dict[str, dict[str, Any]]:
    table = pq.read_table(predictions_path(TRACK_N, out)).to_pylist()
    return {r["problem_id"]: {**r, "details": json.loads(r["details"])} for r in table}


def by_mark(replies: dict[str, Shaped]) -> Any:
    def shape(completion: dict[str, Any], prompt: str) -> Shaped:
        for mark, reply in replies.items():
            if mark in prompt:
                return reply(completion) if callable(reply) else reply
        return None
    return shape


# --- time -------------------------------------------------------------------------------------
def test_a_trickled_reply_fails_at_its_deadline(tmp_path: Path,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    """One byte a second keeps every read short: before, the request ran for as long as the
    body lasted (minutes here); now it fails at timeout_s and the run says so."""
    trickle = lambda c: Trickle(json.dumps(c).encode() + b" " * 600, 1.0)  # noqa: E731
    server = ChatServer(shape=by_mark({"[[trickle]]": trickle})).start()
    write_items(tmp_path / "items", n_rows(["[[trickle]]", ""]), [])
    try:
        predict(predict_section(config(server, tmp_path / "cache", timeout_s=TIMEOUT_S,
                                       max_retries=0)),
                tmp_path / "items", tmp_path / "preds")
        [held] = [r for r in server.records if "[[trickle]]" in r.prompt]
        give_up = time.monotonic() + 10  # the server sees the client gone at its next byte
        while held.outcome == "pending" and time.monotonic() < give_up:
            time.sleep(0.1)
    finally:
        server.stop()
    assert held.outcome == "client-gone" and held.finished is not None
    assert held.finished - held.started < TIMEOUT_S + SLACK_S, held.finished - held.started
    got = rows(tmp_path / "preds")
    assert got["n1"]["status"] == "ok"
    assert got["n0"]["status"] == "error"
    assert f"RequestTimeout: POST {server.base_url}/chat/completions timed out (TimeoutError: " \
        f"no complete reply within {TIMEOUT_S:g}s at " in got["n0"]["error"]
    assert "1 of 2 items (50.0%) ended in an error" in capfd.readouterr().err


@pytest.mark.parametrize("backend", ["anthropic", "gemini"])
def test_native_sdks_keep_the_deadline_too(backend: str, tmp_path: Path) -> None:
    """The SDKs' own timeouts are per read as well: the engine's deadline cancels the call."""
    server = RawServer(Trickle(b"{" + b" " * 600 + b"}", 1.0)).start()
    cfg: dict[str, Any] = {"base_url": server.base_url, "model": f"{backend}-fake",
                           "api_key_env": None, "cache_dir": str(tmp_path / "cache"),
                           "timeout_s": TIMEOUT_S, "max_retries": 0}
    try:
        predictor = create_predictor(backend, backend_section(backend, cfg))
        [pred] = predictor.predict(_items(n_rows([""])))
        give_up = time.monotonic() + 10  # the server sees the client gone at its next byte
        while not server.posts and time.monotonic() < give_up:
            time.sleep(0.1)
    finally:
        server.stop()
    [(arrived, left)] = server.posts
    assert left - arrived < TIMEOUT_S + SLACK_S, left - arrived
    assert pred.status == "error", pred.error
    assert f"RequestTimeout: timed out (TimeoutError: no complete reply within {TIMEOUT_S:g}s" \
        in (pred.error or ""), pred.error


def _items(rows_: list[dict[str, Any]]) -> list[Any]:
    from rimo_eval.artifacts.items import Item

    return [Item(TRACK_N, r["problem_id"], r["problem"], r["domain"], 1, True,
                 r["content_hash"], answer=r["answer"]) for r in rows_]


# --- memory -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bomb() -> bytes:
    return gzip_bomb(65 * MiB)  # about 65 KB on the wire


def test_a_gzip_bomb_is_read_up_to_the_cap_only(tmp_path: Path, bomb: bytes) -> None:
    """65 MiB of zeros as a 65 KB gzip body, against a 4 MiB cap: that item's error, read no
    further and not sent again (another try would be paid for the same); an honest gzip reply
    under the cap, and the plain ones, are kept."""
    honest = lambda c: Encoded(gzip.compress(json.dumps(c).encode()))  # noqa: E731
    server = ChatServer(shape=by_mark({"[[bomb]]": Encoded(bomb),
                                       "[[gzip]]": honest})).start()
    write_items(tmp_path / "items", n_rows(["[[bomb]]", "[[gzip]]", ""]), [])
    try:
        predict(predict_section(config(server, tmp_path / "cache", max_reply_bytes=4 * MiB)),
                tmp_path / "items", tmp_path / "preds")
        attempts = [r.attempt for r in server.records if "[[bomb]]" in r.prompt]
    finally:
        server.stop()
    got = rows(tmp_path / "preds")
    assert (got["n1"]["status"], got["n1"]["prediction"]) == ("ok", "1")
    assert (got["n2"]["status"], got["n2"]["prediction"]) == ("ok", "2")
    assert got["n0"]["status"] == "error"
    assert got["n0"]["details"]["error_kind"] == "reply_too_large"
    assert f"predict.openai.max_reply_bytes = {4 * MiB}" in got["n0"]["error"]
    assert attempts == [1]  # not retried
    assert len(cache_entries(tmp_path / "cache")) == 2


@pytest.mark.parametrize("backend", ["anthropic", "gemini"])
def test_a_gzip_bomb_through_a_native_sdk_is_that_items_error(backend: str, tmp_path: Path,
                                                               bomb: bytes) -> None:
    """The SDKs inflate the body inside httpx: the capped transport they are given counts it.
    The bomb is that item's ``reply_too_large``, sent once; the other items are answered."""
    fake = {"anthropic": FakeAnthropic, "gemini": FakeGemini}[backend]
    bombed = Reply(200, bomb, headers={"Content-Encoding": "gzip"}, outcome="bomb")
    server = fake(responder=lambda rec: bombed if "[[bomb]]" in rec.prompt else None).start()
    cfg: dict[str, Any] = {"base_url": server.base_url, "model": f"{backend}-fake",
                           "api_key_env": None, "cache_dir": str(tmp_path / "cache"),
                           "max_reply_bytes": 4 * MiB, "max_retries": 2,
                           "backoff_initial_s": 0.01}
    try:
        predictor = create_predictor(backend, backend_section(backend, cfg))
        preds = predictor.predict(_items(n_rows(["[[bomb]]", "", ""])))
        attempts = [r.attempt for r in server.records if "[[bomb]]" in r.prompt]
    finally:
        server.stop()
    got = {p.problem_id: p for p in preds}
    assert [got[k].status for k in ("n1", "n2")] == ["ok", "ok"], got
    assert got["n0"].status == "error"
    assert got["n0"].details["error_kind"] == "reply_too_large", got["n0"].error
    assert f"predict.{backend}.max_reply_bytes = {4 * MiB}" in (got["n0"].error or "")
    assert len(attempts) == 1  # not retried, though max_retries allows two more


def test_the_sdk_transport_keeps_the_environment_proxy_and_the_cap_through_it(
        tmp_path: Path, bomb: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client given its own transport reads no proxy from the environment: ``client_args``
    mounts one per proxy. The fake answers a proxied request (absolute-form URL) as its own,
    so an answer for a host that does not exist came through the proxy, capped as well."""
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    bombed = Reply(200, bomb, headers={"Content-Encoding": "gzip"}, outcome="bomb")
    proxy = FakeAnthropic(responder=lambda r: bombed if "[[bomb]]" in r.prompt else None).start()
    monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
    cfg: dict[str, Any] = {"base_url": "http://no-such-host.invalid", "model": "claude-fake",
                           "api_key_env": None, "cache_dir": str(tmp_path / "cache"),
                           "max_reply_bytes": 4 * MiB, "max_retries": 0}
    try:
        predictor = create_predictor("anthropic", backend_section("anthropic", cfg))
        preds = predictor.predict(_items(n_rows(["", "[[bomb]]"])))
    finally:
        proxy.stop()
    got = {p.problem_id: p for p in preds}
    assert got["n0"].status == "ok", got["n0"].error
    assert got["n1"].details["error_kind"] == "reply_too_large", got["n1"].error
    assert {r.path for r in proxy.records} == {"/v1/messages"}


# --- depth ------------------------------------------------------------------------------------
def test_json_nested_100000_deep_is_that_items_error(tmp_path: Path,
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    """One reply in six nested 100,000 deep, and one error body so nested: before, a
    RecursionError traceback ended every run and lost the replies in flight. Now each is that
    item's error, the other replies are cached, and a rerun sends only the two again."""
    deep = deep_json(100_000)
    server = ChatServer(shape=by_mark({"[[deep]]": deep, "[[deep_error]]": (500, deep)})).start()
    write_items(tmp_path / "items", n_rows(["[[deep]]", "", "", "[[deep_error]]", "", "", ""]),
                [])
    cfg = config(server, tmp_path / "cache", max_retries=1)
    try:
        predict(predict_section(cfg), tmp_path / "items", tmp_path / "preds")
        first = len(server.records)
        predict(predict_section(cfg), tmp_path / "items", tmp_path / "again")
        again = len(server.records) - first
    finally:
        server.stop()
    for out in ("preds", "again"):
        got = rows(tmp_path / out)
        assert got["n0"]["status"] == "error"
        assert got["n0"]["details"]["error_kind"] == "json_too_deep"
        assert "nested deeper than the parser's recursion limit" in got["n0"]["error"]
        assert got["n3"]["status"] == "error" and "HTTP 500" in got["n3"]["error"]
        assert {pid: (r["status"], r["prediction"]) for pid, r in got.items()
                if pid not in ("n0", "n3")} == {f"n{i}": ("ok", str(i)) for i in (1, 2, 4, 5, 6)}
    assert first == 5 + 1 + 2  # the deep reply once (not retried), the 500 twice (retried)
    assert again == 1 + 2
    assert len(cache_entries(tmp_path / "cache")) == 5
    assert "Traceback" not in capfd.readouterr().err


# --- the terminal -----------------------------------------------------------------------------
HOSTILE_MESSAGE = ("\x1b]0;pwned\x07\x1b[2J\x1b[1;1Hbad\rall good\x9b31m\u202eevil\x00"
                   "\nsecond line\tand a tab")


def test_control_characters_are_escaped_for_the_terminal() -> None:
    shown = for_terminal(HOSTILE_MESSAGE)
    assert not CONTROL.search(shown) and "\u202e" not in shown
    assert shown.startswith("\\x1b]0;pwned\\x07\\x1b[2J")
    assert "bad\\x0dall good\\x9b31m\\u202eevil\\x00\nsecond line\tand a tab" in shown
    assert for_terminal("plain text, ünï, \U0001f600") == "plain text, ünï, \U0001f600"


def test_a_servers_error_text_reaches_the_terminal_escaped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """``rimo-eval predict`` whose server answers one item with a 400 carrying ESC sequences:
    the warning within allow_errors and the error above it show them as escapes."""
    error = (400, {"error": {"message": HOSTILE_MESSAGE, "type": "invalid_request_error"}})
    server = ChatServer(shape=by_mark({"[[hostile]]": error})).start()
    write_items(tmp_path / "data/items", n_rows(["[[hostile]]", ""]), [])
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["predict"] = {**params["predict"], **config(server, tmp_path / "cache")}
    params["predict"]["openai"] = {**params["predict"]["openai"], "temperature": None}
    monkeypatch.chdir(tmp_path)
    outputs = []
    try:
        for allow in (0.5, 0.0):
            params["predict"]["allow_errors"] = allow
            (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
            code = cli_main(["predict"])
            outputs.append((code, capfd.readouterr()))
    finally:
        server.stop()
    (ok, within), (failed, above) = outputs
    assert (ok, failed) == (0, 1)
    assert "predict: WARNING: 1 of 2 items" in within.err
    assert "rimo-eval predict: error: predict: 1 of 2 items" in above.err
    for captured in (within, above):
        # Every line but the progress bar's (tqdm redraws it after a \r: its own text).
        printed = BAR.sub("", captured.out + captured.err)
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in printed
        assert not CONTROL.search(printed), printed
        assert "\u202e" not in printed
