"""Parallel experiments with ``dvc exp run --queue`` and ``dvc queue start -j 2``.

The openai backend talks to the loopback fake chat server (which records every request), so the
test can count what queued runs send. The experiments:

- baseline (``dvc repro`` in the workspace, model m-a): answers m-a into the workspace's
  response cache (the relative default ``.rimo_cache/responses``);
- q-b, q-c (model m-b, different ``concurrency``, an operational knob): the same requests, run
  by the two queue workers, q-c starting while q-b may still be running, so both predict
  processes may write one cache at once;
- q-a (model m-a, another ``concurrency``): already answered by the workspace, so its queued
  run, in a temporary copy of the repo, must send 0 requests;
- s-b (model m-b, ``cache_dir: null``, in the workspace): the sequential, uncached reference.

Only the stages up to ``score`` run (metrics.json is its output): the report notebook adds
nothing to what is tested here and would triple the time.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dvc.repo.experiments.refs import CELERY_FAILED_STASH

from rimo_eval.chat.cache import DB_NAME
from rimo_eval.io.hashing import fingerprint
from tests.support.cache_tools import cache_entries
from tests.support.chat_server import ChatServer
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import env, make_repo, stop_workers

pytestmark = [pytest.mark.slow, pytest.mark.serial]

KEY_ENV = "RIMO_QUEUE_TEST_KEY"
LATENCY_S, MARGIN_S = 0.2, 0.5
# name: (model, concurrency), in queue order. q-a (all cached, quick) runs beside q-b, so q-c
# starts later and the two m-b runs do not end at the same instant: two experiments collected
# at once by DVC 3.67's workers once lost one's ref (queue status Success, no refs/exps entry).
QUEUED = {"q-b": ("m-b", 4), "q-a": ("m-a", 2), "q-c": ("m-b", 3)}


def run(cwd: Path, *args: str, check: bool = True, timeout: float = 900
        ) -> subprocess.CompletedProcess[str]:
    e = {**env(), KEY_ENV: "sk-queue-test"}
    proc = subprocess.run(args, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def exp_metrics(repo: Path) -> dict[str, dict[str, Any]]:
    """metrics.json (git-tracked, so in each experiment's commit) by experiment name."""
    refs = run(repo, "git", "for-each-ref", "refs/exps", "--format=%(refname) %(objectname)")
    out = {}
    for line in refs.stdout.split("\n"):
        if line.startswith("refs/exps/") and "/exps/celery" not in line:
            ref, sha = line.split()
            out[ref.rsplit("/", 1)[1]] = json.loads(
                run(repo, "git", "show", f"{sha}:reports/metrics.json").stdout)
    return out


def wait_for_queue(repo: Path, names: list[str], timeout_s: float = 600) -> str:
    """``dvc queue status`` once every experiment in ``names`` is done (Success or Failed).

    Polled on git refs (a few ms each): an experiment's ref appears when its worker collects
    it, a failed one lands in the failed stash; only then is ``dvc queue status`` (a second of
    DVC's CPU, taken from the two workers) asked what it says.
    """
    deadline = time.monotonic() + timeout_s
    status = ""
    while time.monotonic() < deadline:
        refs = run(repo, "git", "for-each-ref", "--format=%(refname)", "refs/exps").stdout.split()
        done = {ref.rsplit("/", 1)[1] for ref in refs}
        if set(names) <= done or f"refs/{CELERY_FAILED_STASH}" in refs:
            status = run(repo, "dvc", "queue", "status").stdout
            rows = [ln for ln in status.splitlines() if any(f" {n} " in f" {ln} " for n in names)]
            if len(rows) == len(names) and all(("Success" in r or "Failed" in r) for r in rows):
                return status
            time.sleep(1.5)
        time.sleep(0.5)
    raise AssertionError(f"queue not done after {timeout_s} s:\n{status}")


@pytest.fixture(scope="module")
def queued(tmp_path_factory: pytest.TempPathFactory, mirror_dir: Path) -> Iterator[dict[str, Any]]:
    server = ChatServer(latency_s=LATENCY_S).start()
    repo = make_repo(tmp_path_factory.mktemp("queue") / "repo", mirror_dir, predict={
        "backend": "openai", "limit": 4,
        # The whole section: dvc.yaml declares each predict.openai key it reads.
        "openai": {**yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["predict"]["openai"],
                   "base_url": server.base_url, "model": "m-a", "api_key_env": KEY_ENV,
                   "max_retries": 0, "timeout_s": 30, "concurrency": 1,
                   "cache_dir": ".rimo_cache/responses"}})  # relative: the default
    try:
        run(repo, "dvc", "repro", "score")
        run(repo, "git", "add", "-A")
        run(repo, "git", "commit", "-qm", "baseline m-a")
        baseline = json.loads((repo / "reports/metrics.json").read_text())
        baseline_requests = len(server.ok_records())
        server.reset()
        for name, (model, conc) in QUEUED.items():
            run(repo, "dvc", "exp", "run", "--queue", "-n", name, "score",
                "-S", f"predict.openai.model={model}", "-S", f"predict.openai.concurrency={conc}")
        started = time.monotonic()
        # Into a file, not through pipes: the workers it starts inherit its stdout and stderr,
        # so reading them to the end waited for the workers' exit (10 s after the queue is
        # empty, or never: see stop_workers).
        start_log = repo.parent / "queue-start.log"
        with start_log.open("w") as out:
            code = subprocess.run(["dvc", "queue", "start", "-j", "2"], cwd=repo,
                                  env={**env(), KEY_ENV: "sk-queue-test"}, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=120).returncode
        assert code == 0, start_log.read_text()
        status = wait_for_queue(repo, list(QUEUED))
        queue_s = time.monotonic() - started
        records = list(server.records)
        stop_workers(repo)  # before the next DVC commands, which would wait on their replies
        logs = {n: run(repo, "dvc", "queue", "logs", n).stdout for n in QUEUED}
        server.reset()
        run(repo, "dvc", "exp", "run", "-n", "s-b", "score", "-S", "predict.openai.model=m-b",
            "-S", "predict.openai.cache_dir=null")
        sequential_requests = len(server.ok_records())
        yield {"repo": repo, "baseline": baseline, "baseline_requests": baseline_requests,
               "status": status, "records": records, "logs": logs, "queue_s": queue_s,
               "metrics": exp_metrics(repo), "sequential_requests": sequential_requests}
    finally:
        stop_workers(repo, kill=True)
        server.stop()


def test_all_three_finish_and_queue_status_and_logs_show_them(queued: dict[str, Any]) -> None:
    for name in QUEUED:
        row = next(ln for ln in queued["status"].splitlines() if f" {name} " in f" {ln} ")
        assert "Success" in row, queued["status"]
        # q-a changes only concurrency, an operational knob and no param of predict: it reruns
        # nothing (issue 17 section 7).
        ran = "Stage 'predict' didn't change" if name == "q-a" else "Running stage 'predict'"
        assert ran in queued["logs"][name], queued["logs"][name][-2000:]
    assert set(QUEUED) | {"s-b"} <= set(queued["metrics"])


def test_queued_metrics_equal_sequential_runs(queued: dict[str, Any]) -> None:
    m = queued["metrics"]
    # cache_dir and concurrency are operational: same requests, same bytes of metrics.
    assert m["q-b"] == m["q-c"] == m["s-b"]
    assert m["q-a"] == queued["baseline"]
    assert m["q-a"] != m["q-b"]  # the model is in the provenance fingerprint


def test_already_answered_experiment_sends_nothing_from_the_queue(queued: dict[str, Any]
                                                                   ) -> None:
    models = [(r.body or {}).get("model") for r in queued["records"]]
    assert queued["baseline_requests"] > 0
    assert models.count("m-a") == 0  # q-a: every reply from the workspace's cache
    assert "Stage 'predict' didn't change" in queued["logs"]["q-a"], queued["logs"]["q-a"][-2000:]


def test_two_workers_share_one_cache_without_loss_or_needless_repeats(queued: dict[str, Any]
                                                                       ) -> None:
    records = [r for r in queued["records"] if (r.body or {}).get("model") == "m-b"]
    assert all(r.outcome == "ok" for r in records), {r.outcome for r in records}
    by_key: dict[str, list[Any]] = defaultdict(list)
    for r in records:
        by_key[r.key].append(r)
    # A request sent twice is only allowed while the other copy was still in flight: from
    # its send until its reply is in the cache, which the server sees end at its reply plus
    # the client's parse and fsync (MARGIN_S covers those on a loaded 2-core machine).
    repeats = {k: rs for k, rs in by_key.items() if len(rs) > 1}
    for rs in repeats.values():
        assert len(rs) == 2, "a third process asked again"
        first, second = sorted(rs, key=lambda r: r.started)
        assert second.started < first.finished + MARGIN_S, "sent again after it was cached"
    # m-b: q-b and q-c together ask for each distinct request; s-b asks each once, uncached.
    assert len(by_key) == queued["sequential_requests"]
    print(f"m-b: {len(by_key)} distinct requests, {len(records)} sent, {len(repeats)} sent "
          f"twice while both were in flight; queue wall time {queued['queue_s']:.1f} s")
    # Nothing lost, nothing torn: one complete entry per distinct request (m-a's and m-b's).
    cache = queued["repo"] / ".rimo_cache/responses"
    assert {p.name for p in cache.iterdir()} <= {DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"}
    entries = cache_entries(cache)
    assert len(entries) == queued["baseline_requests"] + len(by_key)
    models: defaultdict[str, int] = defaultdict(int)
    for entry in entries:
        assert entry.request is not None and entry.response is not None, entry.key
        assert fingerprint(entry.request) == entry.key
        assert entry.response["texts"], entry.key  # a complete reply, not an error
        models[entry.request["request"]["model"]] += 1
    assert dict(models) == {"m-a": queued["baseline_requests"], "m-b": len(by_key)}
    # No queued run made a cache of its own in its temporary copy.
    assert not list((queued["repo"] / ".dvc/tmp").rglob(".rimo_cache"))
