"""What a command prints from text it did not write (a server's, a model's, a file's, a
record's) reaches the terminal escaped (issue 42 §3, ``rimo_eval.io.terminal``): an ESC
sequence that would retitle the window arrives as the visible ``\\x1b]0;...\\x07``, never raw,
in text output and in ``--json`` output alike (whose reader still gets the same string back).
One test per command, through its CLI entry (the probe's and the key's warnings: their
function; audit's: tests/e2e/test_audit.py, on a full run)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from rimo_eval.chat import probe
from rimo_eval.chat.cache import ResponseCache, request_key
from rimo_eval.chat.errors import RequestTimeout
from rimo_eval.chat.redact import Redactor
from rimo_eval.chat.session import run_sync
from rimo_eval.cli import main
from rimo_eval.io.terminal import for_terminal, json_for_terminal
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N
from tests.support.cache_tools import payload, response
from tests.support.factories import predict_section, small_benchmark
from tests.support.git_project import pushed_project
from tests.support.pipeline_repo import BIN, env

PWNED = "\x1b]0;pwned\x07"
SHOWN = "\\x1b]0;pwned\\x07"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(*texts: str) -> None:
    for text in texts:
        assert not RAW.search(text), repr(text[:2000])


def test_json_for_terminal_reads_back_the_same() -> None:
    doc = {"reason": PWNED + "\x9b2J\u202e"}
    text = json_for_terminal(json.dumps(doc, ensure_ascii=False))
    clean(text)
    assert json.loads(text) == doc
    assert for_terminal(PWNED) == SHOWN


def test_cache_stats_escapes_a_model_name(tmp_path: Path,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    cache = ResponseCache(tmp_path / "cache")
    model = f"m{PWNED}"
    cache.put(request_key(payload(0, model)), payload(0, model), response(0))
    cache.close()
    for extra in ([], ["--json"]):
        assert main(["cache", "stats", "--dir", str(tmp_path / "cache"), *extra]) == 0
        out, err = capfd.readouterr()
        clean(out, err)
        assert (SHOWN if not extra else "\\u001b]0;pwned\\u0007") in out, out
        if extra:
            assert json.loads(out)["by"][0]["model"] == model


def test_the_replay_warning_escapes_the_file_name(tmp_path: Path,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    small_benchmark(tmp_path / "items")
    replay = tmp_path / f"r{PWNED}.jsonl"
    replay.write_text(json.dumps({"track": TRACK_N, "problem_id": "2001a1",
                                  "prediction": "12"}) + "\n", encoding="utf-8")
    predict(predict_section(backend="replay", replay={"path": str(replay)}), tmp_path / "items",
            tmp_path / "preds")
    out, err = capfd.readouterr()
    clean(out, err)
    assert f"predict: warning: replay {tmp_path}/r{SHOWN}.jsonl covers 1 of the 8" in err, err


def test_sweep_status_escapes_a_records_reason(tmp_path: Path) -> None:
    """A task's record (written on a node, from a server's log) with ESC in its reason."""
    work = pushed_project(tmp_path)
    results = tmp_path / "results"
    (work / "sweep.yaml").write_text(json.dumps({
        "models": [{"name": "m-a", "path": "/models/A"}], "git_remote": "origin",
        "results": str(results)}), encoding="utf-8")
    results.mkdir()
    (results / "m-a.json").write_text(json.dumps({
        "status": "failed", "step": "server", "reason": f"the server said {PWNED}"}),
        encoding="utf-8")
    for extra in ([], ["--json"]):
        proc = subprocess.run([str(BIN / "rimo-eval"), "sweep", "status", "sweep.yaml", *extra],
                              cwd=work, env=env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1, proc.stderr  # not on the remote
        clean(proc.stdout, proc.stderr)
        if extra:
            [task] = json.loads(proc.stdout)["tasks"]
            assert task["reason"] == f"the server said {PWNED}"
        else:
            assert f"m-a  failed   not on the remote: the server said {SHOWN}" in proc.stdout


def test_the_probe_warning_escapes_the_base_url(capfd: pytest.CaptureFixture[str]) -> None:
    """An http URL may hold ESC in its path (urlsplit keeps it; params accept it)."""
    async def times_out() -> None:
        raise RequestTimeout("timed out")

    base_url = f"http://127.0.0.1:1/v1{PWNED}"
    run_sync(probe.probe_endpoint(times_out, base_url, 1.0, "predict.openai"))
    out, err = capfd.readouterr()
    clean(out, err)
    assert f"predict.openai: WARNING: http://127.0.0.1:1/v1{SHOWN} did not answer" in err, err


def test_the_short_key_warning_escapes_the_variables_name(
        capfd: pytest.CaptureFixture[str]) -> None:
    Redactor("short", f"KEY{PWNED} (predict.openai.api_key_env)")
    out, err = capfd.readouterr()
    clean(out, err)
    assert f"the API key in KEY{SHOWN} (predict.openai.api_key_env) is too short" in err, err
