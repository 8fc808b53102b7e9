"""The judge stage as a process: ``kill -9`` mid-judging resumes with nothing lost or re-sent,
and the judge's API key reaches no artifact, cache entry or log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rimo_eval.artifacts.judge_record import read as read_judge
from rimo_eval.judge.stage import judge
from tests.support.cache_tools import cache_entries
from tests.support.chat_server import ChatServer
from tests.support.factories import params
from tests.support.judge_setup import (
    KEY_ENV,
    SECRET,
    hashed_reply,
    judge_cfg,
    judge_paths,
    project,
    verdict_json,
    write_params,
)

pytestmark = pytest.mark.chat_server(latency_s=0.02, hang_s=5.0)


def cached_prompts(cache: Path) -> set[str]:
    prompts = set()
    for entry in cache_entries(cache):
        assert entry.request is not None, f"torn entry {entry.key}"
        messages = entry.request["request"]["messages"]
        prompts.add(messages[-1]["content"])
    return prompts


def start(root: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, KEY_ENV: SECRET}
    with open(log, "ab") as fh:
        return subprocess.Popen([sys.executable, "-m", "rimo_eval", "judge", *args], cwd=root,
                                env=env, stdout=fh, stderr=subprocess.STDOUT)


# A kill after 20 replies, polled: in the serial pass. The other two start their own server and
# have no time limit but generous timeouts, so they share the machine in the -n 2 pass.
@pytest.mark.serial
def test_kill_9_while_judging_resumes(server: ChatServer, tmp_path: Path,
                                      mirror_dir: Path) -> None:
    root = project(tmp_path / "p", mirror_dir, limit=30)
    server.responder = hashed_reply
    cfg = judge_cfg(server, root, cache_dir=".rimo_cache/responses", concurrency=2)
    write_params(root, cfg)
    cache, log = root / ".rimo_cache/responses", root / "judge.log"
    proc = start(root, log)
    deadline = time.monotonic() + 60
    while len(server.ok_records()) < 20:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the judge made no progress"
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    paths = judge_paths(root)
    assert not paths["table_path"].exists() and not paths["metrics_path"].exists()
    before, seen = cached_prompts(cache), len(server.records)
    assert len(before) > 0

    proc = start(root, log)
    assert proc.wait(timeout=120) == 0, log.read_text()
    resent = {r.prompt for r in server.records[seen:]} & before
    assert not resent, f"{len(resent)} cached judge requests were sent again"
    answered = server.answered()
    assert sum(answered.values()) - len(answered) <= 2  # re-asked: only what was in flight
    # Nothing lost: the resumed table equals a clean run's, byte for byte.
    clean = tmp_path / "clean"
    clean_paths = {**paths, "table_path": clean / "t.parquet", "metrics_path": clean / "m.json"}
    judge(params(judge={**cfg, "cache_dir": str(clean / "cache")}), **clean_paths)
    assert paths["table_path"].read_bytes() == clean_paths["table_path"].read_bytes()
    assert paths["metrics_path"].read_bytes() == clean_paths["metrics_path"].read_bytes()


def test_the_key_reaches_no_artifact(tmp_path: Path, mirror_dir: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    server = ChatServer().start()
    try:
        # A server that echoes the key back in its verdict: it must be scrubbed before storage.
        server.responder = lambda _b, _p: verdict_json("correct", f"key was {SECRET}")
        root = project(tmp_path, mirror_dir, limit=4)
        cfg = judge_cfg(server, root, cache_dir=".rimo_cache/responses",
                        calibration={"seed": 0, "limit": 4})
        write_params(root, cfg)
        log = root / "judge.log"  # stdout and stderr of both runs: checked below too
        for args in ((), ("--calibrate",)):
            proc = start(root, log, *args)
            assert proc.wait(timeout=120) == 0, log.read_text()
    finally:
        server.stop()
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in server.records)
    assert (root / "reports/judge_calibration.json").is_file()
    table = (root / "data/judge/rimo_p.parquet").read_bytes()
    assert b"[REDACTED]" in table  # the echoed key was there, and was replaced
    leaked = [p for p in root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert not leaked, f"the key is in {leaked}"


@pytest.mark.slow
def test_dvc_repro_runs_the_judge_between_score_and_report(tmp_path: Path, mirror_dir: Path,
                                                           oracle_run: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The real DVC CLI: disabled by default (a "disabled" record: the session's oracle
    ``dvc repro`` of the default params), then enabled with ``dvc exp run -S`` in a fresh repo;
    the metrics show up under RIMO-P.judge.* and in the report."""
    import yaml

    from tests.support.pipeline_repo import make_repo, sh

    default = read_judge(json.loads((oracle_run / "reports/judge.json").read_text()))
    assert default["enabled"] is False
    server = ChatServer().start()
    server.responder = hashed_reply
    monkeypatch.setenv(KEY_ENV, SECRET)
    try:
        repo = make_repo(tmp_path / "repo", mirror_dir, predict={"backend": "oracle",
                                                                  "limit": 3})
        cfg = {"judge.enabled": "true", "judge.base_url": server.base_url,
               "judge.model": "judge-model", "judge.api_key_env": KEY_ENV,
               "judge.max_retries": "0"}
        sh(repo, "dvc", "exp", "run", "--quiet",
           *(a for k, v in cfg.items() for a in ("-S", f"{k}={v}")))
        shown = yaml.safe_load(sh(repo, "dvc", "metrics", "show", "--json").stdout)
        text = json.dumps(shown)
        # Numbers only: the judge model is named in the report, not as a metrics column.
        assert "prefix_score" in text and "judge-model" not in text
        report = read_judge(json.loads((repo / "reports/judge.json").read_text()))
        j = report["RIMO-P"]["judge"]
        assert j["n"] + j["ungradable"] == 3 and len(server.ok_records()) == j["sub_problems"]
        html = (repo / "reports/report.html").read_text()
        assert "RIMO-P by judge (not the benchmark" in html and "judge-model" in html
        # Everything the runs wrote (the copied tests hold the test key as a literal).
        leaked = [p for p in repo.rglob("*") if p.is_file() and not {".git", "tests"} & set(
            p.relative_to(repo).parts) and SECRET.encode() in p.read_bytes()]
        assert not leaked
    finally:
        server.stop()
