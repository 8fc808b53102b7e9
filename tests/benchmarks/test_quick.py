"""Every benchmark script runs to its end in its ``--quick`` mode (issue 29 §7: the headline
benchmark had died after its c = 64 rows, unnoticed, when the response cache changed layout).

The scripts are discovered (``benchmarks/*.py``), so a new one cannot be forgotten: it needs a
``--quick`` mode and an entry in ``ROWS``, the lines its quick run must print. Modules the
scripts import are named in ``HELPERS``. Each quick run is a tiny configuration of the real
thing (real items, real stages, real servers on loopback), well under 30 s on a quiet machine;
nothing here times anything: the figures are the benchmarks' own business.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.chat_server import ChatServer, Record, request_log
from tests.support.paths import REPO_ROOT, find_mirror

BENCH = REPO_ROOT / "benchmarks"

# Imported by the scripts; not benchmarks themselves.
HELPERS = {
    "timed.py": "one timed child process (wall clock, peak RSS)",
    "peer_lmeval.py": "lm-eval as a peer of predict_throughput.py",
    "old_tree.py": "a baseline revision's package (stages before 1.0), for --baseline",
    "view_workload.py": "the synthetic runs view_build.py measures the view on",
}

# A script whose --quick another branch is adding: skipped while its source lacks --quick, run
# (and checked) as soon as it has one.
PENDING: dict[str, str] = {}

# What each script's quick run must print (regexes, multiline, on stdout + stderr): its rows.
_PEER_C64 = r"^(\| {name} .*{conn} 64 |peer {name} .*: skipped, not installed)"
ROWS: dict[str, list[str]] = {
    "predict_throughput.py": [
        r"^\| rimo-eval c=1 \(3 items per track\) +\| +\d+ \| +[\d.]+ s \|",
        r"^\| rimo-eval c=16 \(16 items per track\) +\| +\d+ \|",
        r"^\| rimo-eval c=64 \(16 items per track\) HEADLINE +\| +\d+ \|",
        r"^\| warm: c=64 again, every reply cached +\| +0 \|",
        r"^\| reference: raw asyncio HTTP, 64 conns +\| +\d+ \| +[\d.]+ s \|",
        _PEER_C64.format(name="inspect_ai", conn="max_connections"),
        _PEER_C64.format(name="lm-eval", conn="num_concurrent"),
        r"^peak RSS of predict at c=64: \d+ MiB",
        r"rimo-eval c=64 / raw reference wall time [\d.]+x",
    ],
    "engine_tuning.py": [r"^plain +[\d.]+ +\+0\.000", r"^both +[\d.]+ +[-+][\d.]+"],
    "leaderboard_scale.py": [r"^\| 2 \| 2 \| [\d.]+ s \| [\d.]+ \| [\d.]+ / "],
    # 3 experiments and the workspace, which IS the last of them: ranked once (issue 41 §2).
    "leaderboard_all.py": [r"^\| \S+ \| 3 \| [\d.]+ s \| 3 \|$"],
    "reference_artifacts.py": [
        r'"predict": 0', r'"j:judge": 0',
        r"^digested \d+ oracle files and \d+ k = 3 entries; k = 3 \d+ requests [0-9a-f]{64}"],
    "scale_memory.py": [r"^k=1: \d+ requests; predict [\d.]+ s, \d+ MiB; .*compare [\d.]+ s",
                        r'"cpu_ms_per_request"'],
    # The bomb is read up to the cap only: that request's error, whatever its size.
    "reply_bomb.py": [rf"^\| {b} \| {reply} \| \d+ MiB \|"
                      for b in ("openai", "anthropic", "gemini")
                      for reply in (r"honest, \d+ B gzipped \| ok \d+ characters",
                                    r"bomb, 128 MiB decoded \| failed reply_too_large")],
    "view_build.py": [r"^\| 1 \| 791 \| [\d.]+ s \| [\d.]+ s \| \d+ \|"],
    "experiment_stages.py": [r"^before: load average ", r"^CPU \(user",
                             r"^\| median of 1 \| [\d.]+ s \| [\d.]+ s \| -?[\d.]+ s \|"],
    "export_scale.py": [r"^\| 2 \| 1582 \| \d+ MiB \| \d+ MiB \| [\d.]+ s \| \d+ MiB \|"],
    "items_audit.py": [r"^\| 10 runs x 791 items \| audit [\d.]+ s \(median",
                       r"^suspect_gold: precision [\d.]+ \(\d+/\d+\), recall"],
    "cache_scale.py": [
        r"^[\d,]+ entries, [\d.]+ MiB \(built in [\d.]+ s\)",
        r"^\| open \+ first lookup \(median of \d+\) \| [\d.]+ ms \|",
        r"^\| `cache stats` \| [\d.]+ s \|",
        r"^\| `cache verify` \| [\d.]+ s \|",
        r"^\| `cache prune --older-than 50d` \| [\d.]+ s \|",
        r"^\| files before / after prune \| [\d.]+ MiB / [\d.]+ MiB \(\d+%\) \|",
        r"^\| first open \+ lookup after that kill \| [\d.]+ ms \|",
        r"^\| damaged page: `verify` \(`--recover` now\) \| [\d.]+ s, recovered [\d,]+ of "
        r"[\d,]+, lost \d+ \|"],
    # Two workers started together send no request twice; after a kill -9 the survivor's
    # tables are still the reference's.
    "cache_workers.py": [
        r"^\| 2 workers \| now \| 50 ms, c = 8 \| (\d+) \| \1 \| 0 \(0\.0%\) \|.* \| yes \|$",
        r"^\| 2 workers, kill -9 of one \| now \| .* \| yes \|; kill of worker 0 at "],
}

# Other paths of a script, run with these arguments after --quick: (arguments, rows).
PATHS: dict[str, tuple[list[str], list[str]]] = {
    # The reasoning workload (issue 33): timed builds apart from the one sampled for memory.
    "view_build.py --reasoning-chars": (
        ["--reasoning-chars", "2000", "--builds", "2"],
        [r"^\| 1 \| 1 \| [\d,]+ \| \d+ MiB \| [\d.]+ s \| [\d.]+ s \([\d.]+-[\d.]+\) \| "
         r"[\d,]+ MiB \| \d+ MiB \| [\d.]+ \|"]),
}


def scripts() -> list[str]:
    return sorted(p.name for p in BENCH.glob("*.py") if p.name not in HELPERS)


def test_the_lists_name_real_scripts() -> None:
    """A renamed or removed script must leave the lists too, or its check silently lapses."""
    names = {p.name for p in BENCH.glob("*.py")}
    assert set(HELPERS) <= names
    assert set(PENDING) <= names
    assert set(ROWS) == set(scripts())
    assert {name.split()[0] for name in PATHS} <= names


@pytest.mark.slow
@pytest.mark.parametrize("name", scripts() + sorted(PATHS))
def test_quick_mode_runs_to_the_end(name: str, tmp_path: Path) -> None:
    script, (extra, rows) = name.split()[0], PATHS.get(name, ([], ROWS.get(name, [])))
    source = (BENCH / script).read_text(encoding="utf-8")
    if script in PENDING and "--quick" not in source:
        pytest.skip(f"{script} has no --quick yet: {PENDING[script]}")
    assert script in ROWS, f"benchmarks/{script} is new: add the rows its --quick prints to ROWS"
    if script == "view_build.py" and os.environ.get("RIMO_EVAL_NO_BROWSER") == "1":
        pytest.skip("RIMO_EVAL_NO_BROWSER=1, as for the browser tests (tests/support/browser.py)")
    env = {**os.environ, "TMPDIR": str(tmp_path), "RIMO_MIRROR": str(find_mirror()),
           "TQDM_DISABLE": "1"}
    # Its own process group: a script past the limit is killed with the servers it started.
    proc = subprocess.Popen([sys.executable, str(BENCH / script), "--quick", *extra],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{name} --quick ran past 300 s:\n{output[-4000:]}")
    assert proc.returncode == 0, f"{name} --quick exited {proc.returncode}:\n{output[-4000:]}"
    missing = [row for row in rows if not re.search(row, output, re.MULTILINE)]
    assert not missing, f"{name} --quick did not print {missing}:\n{output[-4000:]}"


def _post(base_url: str, body: dict[str, object]) -> int:
    request = urllib.request.Request(f"{base_url}/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_server_log_waits_for_a_reply_still_being_logged(server: ChatServer) -> None:
    """A reply is logged ok just after its bytes went out: a client that reads it and asks for
    the log at once must still find it (a race seen once in CI's parallel pass)."""
    mark = request_log(server.base_url)["next"]
    body = {"model": "m", "messages": [{"role": "user", "content": "late"}]}
    rec = Record(body, "k", "late", {}, time.monotonic())
    with server._lock:
        server.records.append(rec)
    threading.Timer(0.2, lambda: server._finish(rec, "ok", "x")).start()
    assert request_log(server.base_url, mark) == {"next": mark + 1, "requests": [body]}


def test_server_log_gives_back_the_bodies_a_run_sent(server: ChatServer) -> None:
    """predict_throughput's prompts come from the fake server's log, not the cache's layout:
    exactly the requests answered after the mark, in order; failed ones are not prompts."""
    before = {"model": "m", "messages": [{"role": "user", "content": "before"}]}
    assert _post(server.base_url, before) == 200
    mark = request_log(server.base_url)["next"]
    assert request_log(server.base_url, mark) == {"next": mark, "requests": []}
    sent = [{"model": "m", "messages": [{"role": "system", "content": "s"},
                                        {"role": "user", "content": f"p{i} ünï \u2028"}],
             "temperature": 0.0} for i in range(3)]
    failing = {"model": "m", "messages": [{"role": "user", "content": "[[fail:500:*]]"}]}
    assert [_post(server.base_url, b) for b in [sent[0], failing, *sent[1:]]] == \
        [200, 500, 200, 200]
    log = request_log(server.base_url, mark)
    assert log == {"next": mark + 4, "requests": sent}
