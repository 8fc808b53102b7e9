"""``rimo-eval view --partial``: a real ``rimo-eval predict`` against the fake chat server on
loopback, stalled part way (then killed with SIGKILL), and the view of what its response cache
holds, checked against an independent reading of the SQLite file (tests/support/partial_run.py)
and in real Chromium."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.commands.view.command import view
from rimo_eval.errors import StageError
from rimo_eval.run.revision import WORKSPACE
from tests.support import partial_run as pr
from tests.support.browser import chromium, renderer_alive
from tests.support.chat_server import ChatServer
from tests.support.pipeline_repo import env, sh, stop_workers

pytestmark = pytest.mark.slow

K = 2
PARTS = {"2001a1": 1, "2001g1": 2, "2001n1": 3, "2005p3": 1}
REQUESTS = K * (len(pr.N_ITEMS) + sum(PARTS.values()))  # 22: what the whole run sends
ANSWERS = 15  # replies before the server stalls every request


def cache_state(folder: Path) -> tuple[list[str], list[tuple[str, float, str]]]:
    """The cache folder's files and its entries (key, time, sha256 of the stored bytes). Not
    the bytes of -wal and -shm: the running predict writes its heartbeat there meanwhile."""
    conn = sqlite3.connect(f"{(folder / 'responses.sqlite3').as_uri()}?mode=ro", uri=True)
    try:
        rows = [(k, c, hashlib.sha256(d).hexdigest()) for k, c, d in conn.execute(
            "SELECT key, created, data FROM entries ORDER BY key")]
    finally:
        conn.close()
    return sorted(p.name for p in folder.iterdir()), rows


@pytest.fixture(scope="module")
def caught(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The site built by the CLI while predict is stalled mid-run, and once more (in-process)
    after predict was killed; the cache folder before and after the first view."""
    root = tmp_path_factory.mktemp("partial") / "proj"
    with ChatServer() as server:
        pr.project(root, server, K)
        proc = pr.stalled_predict(root, server, ANSWERS)
        try:
            cache = root / ".rimo_cache/r"
            before = cache_state(cache)
            started = time.monotonic()
            result = pr.cli(root, "view", "--partial")
            seconds = time.monotonic() - started
            after = cache_state(cache)
            alive = proc.poll() is None
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        again = root / "again"
        old = Path.cwd()
        os.chdir(root)  # the CLI's own root: "." (a relative cache_dir is resolved there)
        try:
            view(Path("."), [], again, partial=True)
        finally:
            os.chdir(old)
        yield {"root": root, "site": root / "reports/views/workspace.partial", "again": again,
               "stderr": result.stderr, "before": before, "after": after, "alive": alive,
               "seconds": seconds, "answered": len(server.ok_records())}


def test_partial_view_shows_exactly_the_replies_in_the_cache(caught: dict[str, Any]) -> None:
    root, site = caught["root"], caught["site"]
    assert caught["alive"], "predict must still be running while the view reads its cache"
    entries = pr.cache_entries(root)
    assert len(entries) == caught["answered"] >= ANSWERS
    index = pr.site_index(site)
    head = index["runs"][0]
    # The banner's numbers: requests found of the run's whole, and the newest entry's time.
    db = sqlite3.connect(f"{(root / '.rimo_cache/r/responses.sqlite3').as_uri()}?mode=ro",
                         uri=True)
    newest = db.execute("SELECT max(created) FROM entries").fetchone()[0]
    db.close()
    assert head["partial"]["answered"] == len(entries)
    assert head["partial"]["requests"] == REQUESTS
    assert head["partial"]["at"] == time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(newest))
    assert head["k"] == K and head["is_sample"] is False
    # No metrics: the header shows none (metrics.json does not exist for this run).
    assert all(m["value"] is None for t in head["tracks"].values() for m in t["metrics"])
    # RIMO-N: every sample in the cache graded as an independent regex over its reply says;
    # every other sample pending ("-").
    graded = pr.independent_outcomes(root)
    codes = {it["id"]: it["o"][0] for it in index["items"] if it["track"] == "RIMO-N"}
    for pid, _, _ in pr.N_ITEMS:
        want = "".join(graded.get((pid, j), "-") for j in range(K))
        got = codes[pid].replace("T", "W")  # a cut-off reply is wrong, coded T
        assert got == want, pid
    assert "R" in "".join(codes.values())  # the right answer shows as right
    # RIMO-P: a sample is whole once all its parts are in the cache, else pending.
    per_sample: dict[tuple[str, int], int] = {}
    for e in entries:
        prompt = e["request"]["request"]["messages"][-1]["content"]
        pid = next((p for p in PARTS if f"Prove {p}." in prompt), None)
        if pid is not None:
            key = (pid, int(e["request"].get("sample", 0)))
            per_sample[key] = per_sample.get(key, 0) + 1
    whole_p = {key for key, n in per_sample.items() if n == PARTS[key[0]]}
    p_codes = {it["id"]: it["o"][0] for it in index["items"] if it["track"] == "RIMO-P"}
    for pid in PARTS:
        assert [c != "-" for c in p_codes[pid]] == [(pid, j) in whole_p for j in range(K)], pid
    assert head["partial"]["samples_answered"] == len(graded) + len(whole_p)
    assert head["partial"]["samples"] == K * (len(pr.N_ITEMS) + len(PARTS))
    # The item pages say pending, with no error, for the samples not in the cache.
    for n, it in enumerate(index["items"]):
        samples = pr.site_item(site, n)["runs"][0]
        for s in samples:
            assert (s["status"] == "pending") == (s["o"] == "-"), it["key"]
            if s["status"] == "pending":
                assert s["error"] is None
    assert "PARTIAL" in caught["stderr"]


def test_partial_view_writes_nothing_to_the_cache_and_rebuilds_byte_identical(
        caught: dict[str, Any]) -> None:
    # Read-only: no entry of the running predict's cache changed, no file was added.
    assert caught["after"] == caught["before"]
    # Same cache contents (predict stalled, then killed), same site, byte for byte.
    assert pr.tree_bytes(caught["again"]) == pr.tree_bytes(caught["site"])
    # Never the view stage's own site; its scratch tables are gone.
    assert not (caught["root"] / "reports/view").exists()
    assert not list((caught["root"] / ".dvc/tmp").glob("rimo-view-partial-*"))


def test_partial_view_of_a_queued_experiment_and_the_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Errors that name their cause, before anything is in the cache; then a finished k = 1
    predict in the workspace and an experiment queued with k = 2 (no worker yet): its partial
    view is its sample 0 of every item, from the k = 1 replies (sample 0's key is a k = 1
    run's key), the rest pending."""
    with ChatServer() as server:
        root = pr.project(tmp_path / "proj", server, 1)
        pr.commit_pipeline(root)
        monkeypatch.chdir(root)
        # Nothing sent yet: no cache file.
        with pytest.raises(StageError, match=r"no response cache at .*\.rimo_cache/r "
                                             r"\(predict\.openai\.cache_dir"):
            view(Path("."), [], tmp_path / "s", partial=True)
        with pytest.raises(StageError, match="one run at a time"):
            view(Path("."), [WORKSPACE, "HEAD"], tmp_path / "s", partial=True)
        # A plain view of a run whose predictions are not there yet says --partial.
        with pytest.raises(StageError, match=r"view --partial"):
            view(Path("."), [], tmp_path / "s")
        assert not (tmp_path / "s").exists()  # nothing half-written
        pr.cli(root, "predict")
        pr.cli(root, "score")
        sh(root, "dvc", "exp", "run", "--queue", "--name", "q2", "-S", "predict.samples=2")
        view(Path("."), [], tmp_path / "ws", partial=True)
        view(Path("."), [], tmp_path / "full")  # the finished run, from score's tables
        metrics = json.loads((root / "reports/metrics.json").read_text())
        view(Path("."), ["q2"], tmp_path / "q2", partial=True)
        sent = len(server.ok_records())
        # A backend that calls no model has nothing in a cache.
        (root / "params.yaml").write_text((root / "params.yaml").read_text().replace(
            "backend: openai", "backend: oracle"))
        with pytest.raises(StageError, match=r"predict\.backend is oracle, which calls no"):
            view(Path("."), [], tmp_path / "s", partial=True)
    requests = len(pr.N_ITEMS) + sum(PARTS.values())
    assert sent == requests
    # Every reply in the cache: the partial view's grid is the finished run's, code for code,
    # and its right / strict counts are metrics.json's.
    ws, full = pr.site_index(tmp_path / "ws"), pr.site_index(tmp_path / "full")
    assert [it["o"] for it in ws["items"]] == [it["o"] for it in full["items"]]
    right = {t: sum(it["o"][0] in ("R", "S") for it in ws["items"] if it["track"] == t)
             for t in ("RIMO-N", "RIMO-P")}
    assert right["RIMO-N"] == metrics["RIMO-N"]["correct"] == 1
    assert right["RIMO-P"] == round(metrics["RIMO-P"]["strict"] * metrics["RIMO-P"]["n"])
    whole = ws["runs"][0]["partial"]
    assert (whole["answered"], whole["requests"]) == (requests, requests)
    assert whole["samples_answered"] == whole["samples"] == len(pr.N_ITEMS) + len(PARTS)
    index = pr.site_index(tmp_path / "q2")
    queued = index["runs"][0]
    assert (queued["partial"]["answered"], queued["partial"]["requests"]) == (requests,
                                                                            2 * requests)
    assert queued["k"] == 2 and queued["kind"] == "queued experiment"
    assert all(it["o"][0][1] == "-" and it["o"][0][0] != "-" for it in index["items"])


def test_partial_banner_and_pending_samples_in_chromium(caught: dict[str, Any]) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    site = caught["site"]
    head = pr.site_index(site)["runs"][0]["partial"]
    index = pr.site_index(site)
    # A RIMO-N item with a pending sample, one with a reply too where there is one (with
    # ANSWERS = 15 there is: the queue order leaves 2001c1 half answered).
    codes = {it["key"]: it["o"][0] for it in index["items"]}
    pending = min((k for k, o in codes.items() if k.startswith("RIMO-N") and "-" in o),
                  key=lambda k: codes[k] == "-" * K)
    with chromium(1200, 900) as driver:
        driver.get((site / "index.html").as_uri())
        WebDriverWait(driver, 20).until(
            lambda d: d.execute_script("return document.documentElement.dataset.ready"))
        banner = driver.execute_script(
            "const p = document.querySelector('[data-partial]'); return p && p.textContent")
        assert banner.startswith(f"partial: {head['answered']} of {REQUESTS} requests "
                                 f"answered, from the response cache at {head['at']}")
        labels = driver.execute_script(
            "return [...document.querySelectorAll('td.v[data-count]')]"
            ".map(c => c.previousElementSibling.textContent)")
        assert labels and all(label.endswith("(partial, so far)") for label in labels)
        driver.get((site / "index.html").as_uri() + f"#item={pending}")
        WebDriverWait(driver, 20).until(lambda d: d.execute_script(
            "const i = document.getElementById('item'); return i && i.dataset.key === "
            f"'{pending}'"))
        text = driver.execute_script("return document.getElementById('item').textContent")
        assert "pending (no reply in the response cache yet)" in text
        # The answer histogram counts the replies, not the pending samples.
        counted = driver.execute_script(
            "return [...document.querySelectorAll('table.hist tr td:nth-child(2)')]"
            ".reduce((a, td) => a + Number(td.textContent), 0)")
        assert counted == sum(c != "-" for c in codes[pending])
        assert renderer_alive(driver)


NEW = 3  # replies the queue's worker gets (at least) before the server holds every request


def test_partial_view_of_a_queued_experiment_while_its_worker_runs(tmp_path: Path) -> None:
    """After ``dvc queue start`` the experiment has left the queue for a worker (DVC's active
    entries), whose predict is held after a few replies: its partial view finds it there and
    shows the replies so far, the finished k = 1 run's and the worker's own, the rest
    pending. The worker shares the workspace's response cache (io/workspace.py)."""
    with ChatServer() as server:
        root = pr.project(tmp_path / "proj", server, 1)
        pr.commit_pipeline(root)
        pr.cli(root, "predict")
        first = len(server.ok_records())
        sh(root, "dvc", "exp", "run", "--queue", "--name", "q2", "-S", "predict.samples=2")
        server.hang_after = first + NEW
        # Into a file: the worker inherits its starter's output (tests/e2e/test_queue.py).
        with (tmp_path / "queue.log").open("w") as log:
            try:
                subprocess.run(["dvc", "queue", "start"], cwd=root, env=env(), stdout=log,
                               stderr=log, check=True, timeout=120)
                deadline = time.monotonic() + 240
                while not (len([r for r in server.records if r.outcome == "hanging"])
                           == pr.CONCURRENCY
                           and len(pr.cache_entries(root)) == len(server.ok_records())
                           >= first + NEW):
                    assert time.monotonic() < deadline, (tmp_path / "queue.log").read_text()
                    time.sleep(0.3)
                status = sh(root, "dvc", "queue", "status", timeout=120).stdout
                result = pr.cli(root, "view", "--partial", "q2")
                answered = len(server.ok_records())  # every slot held: no more come
            finally:
                stop_workers(root, kill=True)
    assert any(line.split()[1:2] == ["q2"] and "Running" in line
               for line in status.splitlines()), status
    assert "PARTIAL view" in result.stdout + result.stderr
    run = pr.site_index(root / "reports/views/q2.partial")["runs"][0]
    assert run["kind"] == "queued experiment" and run["k"] == 2
    partial = run["partial"]
    assert (partial["answered"], partial["requests"]) == (answered, 2 * first)
    assert first < answered < 2 * first
    assert 0 < partial["samples_answered"] < partial["samples"]
