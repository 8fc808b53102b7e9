"""The harness of the predict fault tests: items carrying fault directives for the fake chat
server, the predict config, a predict process to kill, and checks of the cache and outputs."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pyarrow.parquet as pq
import pytest
import yaml

from rimo_eval.artifacts.items import DOMAINS
from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.chat.cache import DB_NAME, ResponseCache
from rimo_eval.io.atomic import PAUSE_ENV
from rimo_eval.io.hashing import fingerprint
from rimo_eval.params.config import ScoreParams
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.stage import score
from tests.support.chat_server import ChatServer, prompt_text
from tests.support.factories import section
from tests.support.paths import REPO_ROOT

SEED = 20250907
N_COUNT, P_COUNT = 60, 20
MAX_RETRIES = 5  # every finite burst below is shorter (with room for a stray timeout)
CONCURRENCY = 4
TIMEOUT_S = 1.0  # a [[hang]] costs one client timeout
KEY_ENV = "RIMO_FAULTS_TEST_UNSET_KEY"  # unset: a loopback server gets the dummy key

# Fault directives and how many items carry each (RIMO-N: in the problem; RIMO-P: in the last
# part, or the problem of a one-part item). "*" bursts never end: the item must be an error.
N_FAULTS = {"fail:429:2": 5, "fail:500:3": 3, "fail:503:1": 3, "fail:502:2": 2, "drop:2": 5,
            "hang:1": 3, "malformed:2": 5, "empty:2": 4, "fail:500:*": 2, "fail:400:*": 1}
P_FAULTS = {"fail:429:2": 2, "fail:503:1": 2, "drop:1": 2, "malformed:1": 2, "empty:1": 2,
            "hang:1": 1, "fail:503:*": 1}
# Kills: one during start-up, some with requests in flight, two inside the publish step.
STARTUP_KILLS, INFLIGHT_KILLS = 1, 5
HOOK_LINE = "rimo-eval test hook: before replace"  # printed by io.atomic before a rename


def gold_reply(value: str) -> str:
    """What ChatServer answers to ``[[gold:value]]`` (the RIMO-P reference when it should match)."""
    return f"Working through it carefully, the answer is \\boxed{{{value}}}."


def _row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "content_hash": fingerprint(row)}


def build_items(rng: random.Random) -> tuple[list[dict], list[dict]]:
    n_faults = [d for d, k in N_FAULTS.items() for _ in range(k)]
    n_faults += [""] * (N_COUNT - len(n_faults))
    rng.shuffle(n_faults)
    n_rows = []
    for i, fault in enumerate(n_faults):
        gold = str((i * 37) % 1000)
        # Some replies carry no box (prediction ""), some golds differ from the boxed value.
        boxed = "" if i % 9 == 4 else f"[[gold:{gold}]]"
        answer = str(int(gold) + 1) if i % 4 == 1 else gold
        text = f"Quantity {i}: compute it. {boxed} {f'[[{fault}]]' if fault else ''}".strip()
        n_rows.append(_row({
            "track": TRACK_N, "problem_id": f"f{i:03d}", "problem": text,
            "domain": DOMAINS[i % len(DOMAINS)], "number_of_parts": 1, "gradable": True,
            "ungradable_reason": None, "solution": "Because.", "answer": answer}))
    p_faults = [d for d, k in P_FAULTS.items() for _ in range(k)]
    p_faults += [""] * (P_COUNT - len(p_faults))
    rng.shuffle(p_faults)
    p_rows = []
    for j, fault in enumerate(p_faults):
        pid = f"q{j:02d}"
        parts = 1 + j % 4
        tag = f" [[{fault}]]" if fault else ""
        wrong = j % 3 == 0  # one reference sub-solution the model will not reproduce
        miss = rng.randrange(parts)
        if parts == 1:
            problem = f"Prove claim {pid}. [[gold:{pid}.1]]{tag}"
            subs = [problem]
        else:
            problem = f"Prove the {parts} claims of {pid} in order."
            subs = [f"Claim {k + 1} of {pid}. [[gold:{pid}.{k + 1}]]"
                    + (tag if k == parts - 1 else "") for k in range(parts)]
        sols = [("an unrelated proof" if wrong and k == miss else gold_reply(f"{pid}.{k + 1}"))
                for k in range(parts)]
        p_rows.append(_row({
            "track": TRACK_P, "problem_id": pid, "problem": problem, "domain": None,
            "number_of_parts": parts, "gradable": True, "ungradable_reason": None,
            "sub_problems": subs, "sub_solutions": sols}))
    return n_rows, p_rows


def openai_config(server: ChatServer, cache_dir: Path) -> dict[str, Any]:
    """The full predict.openai section of params.yaml with this test's overrides."""
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    return {**params["predict"]["openai"], "base_url": server.base_url, "model": "fake",
            "api_key_env": KEY_ENV, "cache_dir": str(cache_dir), "timeout_s": TIMEOUT_S,
            "max_retries": MAX_RETRIES, "backoff_initial_s": 0.01, "backoff_max_s": 0.05,
            "concurrency": CONCURRENCY}


def predict_cfg(openai_cfg: dict[str, Any]) -> dict[str, Any]:
    return {"backend": "openai", "limit": None, "sample_seed": 0, "openai": openai_cfg}


# --- checks ----------------------------------------------------------------------------------
def cache_state(cache_dir: Path) -> tuple[set[str], list[Path]]:
    """The prompts in the cache, after checking the database and that every entry is whole
    and under its own key.

    Returns (cached prompts, debris): the only files allowed are the database, its WAL and
    its shared-memory index; anything else is debris (none is expected).
    """
    prompts: set[str] = set()
    allowed = {DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"}
    debris = [p for p in cache_dir.rglob("*") if p.is_file() and p.name not in allowed]
    cache = ResponseCache(cache_dir)
    try:
        conn = cache.connection()
        if conn is None:  # killed before its first reply
            return prompts, debris
        assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
        for entry in cache.entries():
            if entry.request is None or entry.response is None:
                pytest.fail(f"torn cache entry {entry.key}")
            assert fingerprint(entry.request) == entry.key, f"{entry.key}: not its request's"
            texts = entry.response["texts"]
            assert texts and all(isinstance(t, str) and t for t in texts), entry.key
            prompts.add(prompt_text(entry.request["request"]))
    finally:
        cache.close()
    return prompts, debris


def file_bytes(out_dir: Path) -> dict[str, bytes | None]:
    paths = {t: predictions_path(t, out_dir) for t in TRACKS}
    return {t: p.read_bytes() if p.exists() else None for t, p in paths.items()}


def predictions(out_dir: Path) -> dict[tuple[str, str], tuple[Any, ...]]:
    """(track, id) -> (status, prediction, error, fingerprint); each item exactly once."""
    out: dict[tuple[str, str], tuple[Any, ...]] = {}
    for track in TRACKS:
        for row in pq.read_table(predictions_path(track, out_dir)).to_pylist():
            key = (track, row["problem_id"])
            assert key not in out, f"two predictions for {key}"
            out[key] = (row["status"], row["prediction"], row["error"], row["fingerprint"])
    return out


def outcomes_of(server: ChatServer) -> Counter[str]:
    """What the server did, per kind (a hang still waiting out hang_s counts as a hang)."""
    return Counter("hang" if r.outcome == "hanging" else r.outcome for r in server.records)


def metrics_of(root: Path, items_dir: Path, preds_dir: Path) -> dict[str, Any]:
    metrics = score(section(ScoreParams, "score",
                            bootstrap={"samples": 200, "seed": 0, "confidence": 0.95}),
                    items_dir=items_dir, preds_dir=preds_dir, scores_dir=root / "scores",
                    metrics_path=root / "metrics.json", plots_dir=root / "plots")
    return {k: v for k, v in metrics.items() if k != "provenance"}


# --- the subprocess --------------------------------------------------------------------------
class Stage:
    """One ``python -m rimo_eval --params P predict`` process in ``workdir``, its stderr in a
    file."""

    live: ClassVar[list[subprocess.Popen[bytes]]] = []  # killed at teardown if still running

    def __init__(self, workdir: Path, params: Path, index: int, pause: str | None = None):
        env = {k: v for k, v in os.environ.items() if k not in (PAUSE_ENV, KEY_ENV)}
        if pause:
            env[PAUSE_ENV] = pause
        self.log = workdir / f"stage-{index}.log"
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rimo_eval", "--params", str(params), "predict"],
                cwd=workdir, env=env, stdout=fh, stderr=subprocess.STDOUT)
        Stage.live.append(self.proc)
        self.started = time.monotonic()

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_until(self, cond: Any, limit_s: float, what: str) -> None:
        deadline = time.monotonic() + limit_s
        while not cond():
            assert self.proc.poll() is None, f"predict exited ({self.proc.returncode}) " \
                                             f"before {what}:\n{self.text()[-3000:]}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.005)

    def kill(self) -> None:
        assert self.proc.poll() is None, f"predict already exited:\n{self.text()[-3000:]}"
        os.kill(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait(timeout=10) == -signal.SIGKILL
