"""The openai backend against the fake chat server: its config, items, a run, and a predict to kill
-9 once the client stalls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.items import Item
from rimo_eval.chat.cache import Entry
from rimo_eval.predictors.base import Prediction
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.cache_tools import cache_entries
from tests.support.chat_server import ChatServer
from tests.support.factories import backend_section

KEY_ENV = "RIMO_TEST_API_KEY"


SECRET = "sk-rimo-test-7f3c9d2e1b5a4f60SECRET"


def make_config(server: ChatServer, tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    config = {"base_url": server.base_url, "model": "fake-model", "api_key_env": KEY_ENV,
              "cache_dir": str(tmp_path / "cache"), "timeout_s": 10.0, "max_retries": 3,
              "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "concurrency": 8}
    return {**config, **overrides}


def n_item(pid: str, problem: str, gold: str = "0") -> Item:
    return Item(TRACK_N, pid, problem, "algebra", 1, True, f"hash-{pid}", answer=gold)


def p_item(pid: str, parts: list[str], problem: str | None = None) -> Item:
    return Item(TRACK_P, pid, problem or f"Problem {pid}: prove all parts.", "geometry",
                len(parts), True, f"hash-{pid}", sub_problems=tuple(parts),
                sub_solutions=tuple("ref" for _ in parts))


def gold_items(count: int, prefix: str = "n") -> list[Item]:
    return [n_item(f"{prefix}{i}", f"Compute thing {i}. [[gold:{i * 7}]]", str(i * 7))
            for i in range(count)]


def run(config: dict[str, Any], items: list[Item]) -> dict[str, Prediction]:
    preds = OpenAIPredictor(backend_section("openai", config)).predict(items)
    assert len(preds) == len(items)
    return {p.problem_id: p for p in preds}


def cache_files(config: dict[str, Any]) -> list[Entry]:
    return cache_entries(config["cache_dir"])


DRIVER = """
import json, sys
from rimo_eval.artifacts.items import Item
from rimo_eval.params.chat import OpenAIParams
from rimo_eval.params.config import parse_section
from rimo_eval.predictors.openai_chat import OpenAIPredictor
config, items_path, out_path = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
items = [Item(**{**d, "sub_problems": tuple(d["sub_problems"]),
                 "sub_solutions": tuple(d["sub_solutions"])}) for d in json.load(open(items_path))]
samples = config.pop("samples", 1)  # predict.samples, set by the stage in a real run
predictor = OpenAIPredictor(parse_section(OpenAIParams, config, "predict.openai"))
predictor.samples = samples
preds = predictor.predict(items)
json.dump({p.problem_id + (f"#{p.sample}" if p.sample else ""): [p.status, p.prediction]
           for p in preds}, open(out_path, "w"))
"""


def kill_when_stalled(server: ChatServer, tmp_path: Path, config: dict[str, Any],
                      items: list[Item], answers: int
                      ) -> tuple[list[str], dict[str, str], list[Any]]:
    """Run DRIVER (concurrency 4) in a subprocess; after ``answers`` replies every request
    hangs, and once each answer is cached and all 4 slots hang, kill -9 it. Returns the argv
    and env to rerun the driver, and the requests hanging at the kill."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "items.json").write_text(json.dumps([asdict(it) for it in items]))
    (tmp_path / "driver.py").write_text(DRIVER)
    argv = [sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "config.json"),
            str(tmp_path / "items.json"), str(tmp_path / "out.json")]
    env = {**os.environ, KEY_ENV: SECRET}
    server.hang_after = answers  # the client stalls mid-way
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        hanging = [r for r in server.records if r.outcome == "hanging"]
        busy = [r for r in server.records if r.outcome == "pending"]
        if (len(hanging) == 4 and not busy
                and len(cache_files(config)) == len(server.ok_records()) >= answers):
            break
        assert proc.poll() is None and time.monotonic() < deadline, "client never stalled"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return argv, env, hanging
