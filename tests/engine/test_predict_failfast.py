"""Fast, loud failure of the chat backends against loopback servers started here: a refused
port and an unresolvable host stop the stage in seconds before anything is written, a
black-hole server is shown by the progress bar and the stall warning, an all-5xx server and a
server that dies mid-run trip the circuit breaker (the replies received stay cached and a
re-run resumes), and ``predict.allow_errors`` decides whether a run with failed items passes."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.artifacts.items import Item
from rimo_eval.chat.progress import Progress
from rimo_eval.errors import ConfigError, StageError
from rimo_eval.predict import predict
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from rimo_eval.rimo.tracks import TRACK_N
from tests.support.cache_tools import cache_entries as stored_entries
from tests.support.chat_server import BlackHole, ChatServer
from tests.support.factories import backend_section, predict_section, write_items
from tests.support.factories import n_item as n_row

# Timed (a breaker that trips in seconds, a stall warning after 1 s) and a server revived on
# its old port: kept apart from other tests (the serial pass).
pytestmark = pytest.mark.serial


def config(base_url: str, tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    return {"base_url": base_url, "model": "fake", "api_key_env": None,
            "cache_dir": str(tmp_path / "cache"), "timeout_s": 10.0, "max_retries": 2,
            "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4, **overrides}


def items(count: int, tag: str = "") -> list[Item]:
    return [Item(TRACK_N, f"n{i}", f"Compute {i}. [[gold:{i}]]{tag}", "algebra", 1, True,
                 f"h{i}", answer=str(i)) for i in range(count)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cache_entries(tmp_path: Path) -> int:
    return len(stored_entries(tmp_path / "cache"))


def stage_items(tmp_path: Path, rows: list[dict]) -> Path:
    write_items(tmp_path / "items", rows, [])
    return tmp_path / "items"


# --- the probe -------------------------------------------------------------------------------
def test_refused_port_stops_the_stage_in_seconds_and_writes_nothing(tmp_path: Path) -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    items_dir = stage_items(tmp_path, [n_row(f"a{i}", str(i)) for i in range(30)])
    started = time.monotonic()
    with pytest.raises(StageError) as err:
        predict(predict_section({"backend": "openai", "openai": config(base_url, tmp_path)}),
                items_dir, tmp_path / "preds")
    assert str(err.value) == f"connection refused at {base_url}: is the server running?"
    assert time.monotonic() - started < 15  # not 30 items x 3 attempts x backoff
    assert not (tmp_path / "preds").exists() and cache_entries(tmp_path) == 0


def test_unresolvable_host_names_the_host(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIMO_FAILFAST_KEY", "sk-failfast-test-key")
    cfg = config("http://no-such-host.invalid/v1", tmp_path, api_key_env="RIMO_FAILFAST_KEY")
    with pytest.raises(StageError, match=r"DNS lookup of 'no-such-host\.invalid' failed"):
        OpenAIPredictor(backend_section("openai", cfg)).predict(items(3))
    assert cache_entries(tmp_path) == 0


def test_missing_models_endpoint_is_not_a_failure(server: ChatServer, tmp_path: Path) -> None:
    server.serve_models = False  # GET /models -> 404, as on many servers
    cfg = backend_section("openai", config(server.base_url, tmp_path))
    preds = OpenAIPredictor(cfg).predict(items(5))
    assert [p.status for p in preds] == ["ok"] * 5
    assert server.model_probes == 1  # one probe for the whole run


def test_a_warm_cache_needs_no_server(server: ChatServer, tmp_path: Path) -> None:
    cfg = backend_section("openai", config(server.base_url, tmp_path))
    first = OpenAIPredictor(cfg).predict(items(6))
    server.stop()
    again = OpenAIPredictor(cfg).predict(items(6))  # nothing to send: no probe, no error
    assert again == first and server.model_probes == 1


def test_tls_failure_names_the_url(server: ChatServer, tmp_path: Path) -> None:
    base_url = server.base_url.replace("http://", "https://")  # TLS to a plain-HTTP server
    with pytest.raises(StageError, match=rf"TLS handshake with {re.escape(base_url)} failed"):
        OpenAIPredictor(backend_section("openai", config(base_url, tmp_path))).predict(items(3))
    assert cache_entries(tmp_path) == 0 and not server.records


# --- hangs -----------------------------------------------------------------------------------
def test_black_hole_server_is_shown_as_stalled(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    hole = BlackHole().start()
    base_url = hole.base_url
    try:
        cfg = config(base_url, tmp_path, timeout_s=2.5, max_retries=0,
                     stall_warning_s=1.0)
        preds = OpenAIPredictor(backend_section("openai", cfg)).predict(items(3))
    finally:
        hole.stop()
    err = capsys.readouterr().err
    assert f"{base_url} did not answer GET /models within 2.5s" in err
    assert "no request has finished for" in err and "(3 in flight, oldest" in err
    assert all(p.status == "error" and "Timeout" in (p.error or "") for p in preds)


def test_progress_reports_in_flight_and_oldest_age() -> None:
    progress = Progress(3, "predict[test]", stall_warning_s=10.0)
    try:
        first, _ = progress.begin(), progress.begin()
        now = progress.inflight[first] + 42.0
        assert progress.postfix(now) == "in flight 2, oldest 42s"
        progress.last_done = now - 12.0
        assert "no request has finished for 12s (2 in flight, oldest 42s)" in (
            progress.check(now) or "")
        assert progress.check(now + 1) is None  # once per stall period, not every tick
        assert progress.check(now + 9) is not None  # ...and again when it lasts another period
        progress.end(first)
        assert progress.postfix(time.monotonic()).startswith("in flight 1,")
    finally:
        progress.close()


# --- the circuit breaker ---------------------------------------------------------------------
def test_all_5xx_server_trips_the_breaker(server: ChatServer, tmp_path: Path) -> None:
    server.fail_all = 503
    items_dir = stage_items(tmp_path, [n_row(f"a{i}", str(i)) for i in range(60)])
    cfg = config(server.base_url, tmp_path, max_retries=1, breaker_window=6)
    with pytest.raises(StageError, match=r"the last 6 requests all failed at the transport "
                                         r"level.*503"):
        predict(predict_section(backend="openai", openai=cfg), items_dir, tmp_path / "preds")
    # Stopped after about one window of requests (plus those in flight), not all 60 x 2.
    assert len(server.records) <= 2 * (6 + 4)
    assert not (tmp_path / "preds").exists()


def test_requests_failing_for_their_own_reason_do_not_trip_it(server: ChatServer,
                                                              tmp_path: Path) -> None:
    bad = [Item(TRACK_N, f"x{i}", f"Too long {i} [[fail:400:*]]", "algebra", 1, True, f"x{i}",
                answer="0") for i in range(8)]
    cfg = backend_section("openai", config(server.base_url, tmp_path, breaker_window=3))
    preds = OpenAIPredictor(cfg).predict(bad)
    assert [p.status for p in preds] == ["error"] * 8


def test_server_dying_mid_run_stops_and_a_rerun_resumes(server: ChatServer,
                                                        tmp_path: Path) -> None:
    server.die_after = 10
    cfg = backend_section("openai", config(server.base_url, tmp_path, breaker_window=4))
    with pytest.raises(StageError, match=r"the last 4 requests all failed.*re-run to resume"):
        OpenAIPredictor(cfg).predict(items(40))
    answered = sum(server.answered().values())
    assert answered >= 10 and cache_entries(tmp_path) == answered  # every answer kept
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    revived = ChatServer().start(port)
    try:
        preds = OpenAIPredictor(cfg).predict(items(40))
        resent = sum(revived.answered().values())
    finally:
        revived.stop()
    assert [p.status for p in preds] == ["ok"] * 40
    assert resent == 40 - answered  # no answered-and-stored request was sent again


# --- predict.allow_errors --------------------------------------------------------------------
def error_rows(count: int, bad: int) -> list[dict]:
    rows = [n_row(f"a{i}", str(i)) for i in range(count)]
    for row in rows[:bad]:
        row["problem"] += " [[fail:400:*]]"
    return rows


def test_errors_above_the_allowed_share_fail_naming_the_commonest(
        server: ChatServer, tmp_path: Path) -> None:
    items_dir = stage_items(tmp_path, error_rows(20, 2))  # 10% > the default 5%
    with pytest.raises(StageError) as err:
        predict(predict_section({"backend": "openai", "openai": config(server.base_url, tmp_path)}),
                items_dir, tmp_path / "preds")
    message = str(err.value)
    assert "2 of 20 items (10.0%) ended in an error" in message
    assert "commonest (2x)" in message and "400" in message and "allow_errors = 0.05" in message
    assert not (tmp_path / "preds").exists()
    assert cache_entries(tmp_path) == 18  # the good replies are kept for the re-run


def test_errors_within_the_allowed_share_pass_loudly(server: ChatServer, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    items_dir = stage_items(tmp_path, error_rows(20, 2))
    out = predict(predict_section(backend="openai", allow_errors=0.1,
                                  openai=config(server.base_url, tmp_path)),
                  items_dir, tmp_path / "preds")
    assert out["errors"] == 2 and out["counts"][TRACK_N]["error"] == 2
    assert "WARNING: 2 of 20 items (10.0%) ended in an error" in capsys.readouterr().err


def test_every_item_failing_fails_even_when_every_error_is_allowed(
        server: ChatServer, tmp_path: Path) -> None:
    """allow_errors = 1 let a run whose calls all failed exit 0 with nothing but errors."""
    items_dir = stage_items(tmp_path, error_rows(4, 4))
    with pytest.raises(StageError, match=r"4 of 4 items \(100\.0%\) ended in an error.*That "
                                         r"is every one failed, whatever predict\.allow_errors"):
        predict(predict_section(backend="openai", allow_errors=1.0,
                                openai=config(server.base_url, tmp_path)),
                items_dir, tmp_path / "preds")
    assert not (tmp_path / "preds").exists()


@pytest.mark.parametrize("value", [-0.1, 1.5, "5%", True])
def test_allow_errors_must_be_a_share(value: Any, tmp_path: Path) -> None:
    items_dir = stage_items(tmp_path, error_rows(2, 0))
    # Checked with the typed params (rimo_eval.params.config), before any backend is built.
    with pytest.raises(ConfigError, match=r"predict\.allow_errors: must be a share between 0 and "
                                          r"1, got "):
        predict(predict_section(backend="constant", allow_errors=value), items_dir,
                tmp_path / "preds")



def test_with_k_samples_the_share_is_of_item_samples(server: ChatServer, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    items_dir = stage_items(tmp_path, error_rows(20, 1))  # both samples of one item fail
    out = predict(predict_section(backend="openai", samples=2,
                                  openai=config(server.base_url, tmp_path)),
                  items_dir, tmp_path / "preds")
    assert out["errors"] == 2 and out["counts"][TRACK_N]["error"] == 2
    assert "WARNING: 2 of 40 item samples (5.0%) ended in an error" in capsys.readouterr().err
    items_dir = stage_items(tmp_path / "more", error_rows(20, 2))  # 4 of 40: over 5%
    with pytest.raises(StageError, match=r"4 of 40 item samples \(10\.0%\)"):
        predict(predict_section(backend="openai", samples=2,
                                openai=config(server.base_url, tmp_path)),
                items_dir, tmp_path / "more" / "preds")
