"""``--export-batch`` / ``--import-batch``: the ``vllm run-batch`` loop, with a fake offline
engine that answers each exported line through the fake model (as the engine would, no
server), writes its output shuffled, drops a line, puts a ``<think>`` block in the content
(vllm-project/vllm#26224); an unknown custom_id stops the import with nothing written."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.support.chat_server import ChatServer
from tests.support.estimate_project import cli, project
from tests.support.fake_batch import forward
from tests.support.paths import REPO_ROOT

THINK = "<think>Maybe \\boxed{999}? No.</think>"


def run_batch(chat: ChatServer, src: Path, out: Path, drop: int = 0, seed: int = 0) -> int:
    """What `vllm run-batch -i src -o out` does, answered by the fake model."""
    lines = [json.loads(x) for x in src.read_text().splitlines()]
    results = []
    for n, line in enumerate(lines):
        status, body = forward(chat.base_url + "/chat/completions",
                               json.dumps(line["body"]).encode())
        message = body["choices"][0]["message"]
        message["content"] = THINK + message["content"]  # no reasoning parser in run-batch
        results.append({"id": f"vllm-{n}", "custom_id": line["custom_id"],
                        "response": {"status_code": status, "request_id": str(n),
                                     "body": body}, "error": None})
    random.Random(seed).shuffle(results)
    out.write_text("".join(json.dumps(r) + "\n" for r in results[drop:]))
    return len(lines)


def predictions(root: Path) -> dict[str, list[object]]:
    folder = root / "data" / "predictions"
    return {t: [json.dumps(x.tolist() if hasattr(x, "tolist") else x)
                for x in pd.read_parquet(folder / f"{t}.parquet")["prediction"]]
            for t in ("rimo_n", "rimo_p")}


def test_export_import_loop_matches_an_online_run(server: ChatServer, tmp_path: Path) -> None:
    # A server that reports nothing about its weights beyond the name: batch files carry no
    # such report, so only then do their replies serve an online run (rimo_eval.chat.served).
    server.model_card = {"id": "fake-model", "object": "model"}
    root = project(tmp_path / "batch", server, samples=2)
    sizes = []
    for round_ in range(6):
        said = cli(root, "predict", "--export-batch", "in.jsonl").stdout
        if "0 requests" in said:
            break
        sizes.append(run_batch(server, root / "in.jsonl", root / "out.jsonl",
                               drop=1 if round_ == 0 else 0, seed=round_))
        said = cli(root, "predict", "--import-batch", "out.jsonl").stdout
        assert f"imported {sizes[-1] - (round_ == 0)} of {sizes[-1]}" in said
    # 8 RIMO-N + 8 first parts, then the later parts (and the dropped line again), <= 4 rounds
    assert sizes[0] == 16 and len(sizes) <= 4
    assert sum(sizes) == 2 * (4 + 1 + 2 + 3 + 1) + 1
    server.reset()
    cli(root, "predict")
    assert server.records == []  # every reply came from the imported files
    online = project(tmp_path / "online", server, samples=2)
    cli(online, "predict")
    # the <think> block was split off: RIMO-P's proofs (the prediction) hold none of it
    assert predictions(root) == predictions(online)
    assert "999" not in json.dumps(predictions(root))


def test_an_unknown_custom_id_stops_the_import_with_nothing_written(
        server: ChatServer, tmp_path: Path) -> None:
    root = project(tmp_path, server, samples=1)
    cli(root, "predict", "--export-batch", "in.jsonl")
    run_batch(server, root / "in.jsonl", root / "out.jsonl")
    lines = (root / "out.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    bad["custom_id"] = "f" * 64
    lines[1] = json.dumps(bad)
    (root / "out.jsonl").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "rimo_eval.cli", "predict", "--import-batch",
                           "out.jsonl"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert "out.jsonl:2: custom_id 'ffff" in done.stderr and "not a request of this round" \
        in done.stderr
    assert not list((tmp_path / "cache").rglob("*.json"))  # nothing half-written


@pytest.mark.parametrize("backend", ["oracle"])
def test_batch_files_refuse_a_backend_without_requests(server: ChatServer, tmp_path: Path,
                                                       backend: str) -> None:
    root = project(tmp_path, server, samples=1)
    params = (root / "params.yaml").read_text().replace("backend: openai", f"backend: {backend}")
    (root / "params.yaml").write_text(params)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "rimo_eval.cli", "predict", "--export-batch",
                           "in.jsonl"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and "batch files are for the openai backend" in done.stderr
