"""``rimo-eval predict --estimate`` and ``reports/predict_run.json``, through the real CLI in a
scratch project folder, against the loopback chat server."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rimo_eval.artifacts.items import load_items
from rimo_eval.artifacts.paths import PREDICT_RUN_PATH
from rimo_eval.predictors.openai_chat import OpenAIPredictor
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from tests.support.chat_server import ChatServer
from tests.support.estimate_project import cli, project
from tests.support.factories import backend_section
from tests.support.paths import REPO_ROOT

N_CALLS, P_CALLS = 4, 1 + 2 + 3 + 1  # small_benchmark: 4 RIMO-N items, RIMO-P parts 1, 2, 3, 1


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*")}


def line(out: str, track: str) -> str:
    return next(row.strip() for row in out.splitlines() if row.strip().startswith(f"{track}:"))


def test_estimate_sends_nothing_writes_nothing_and_counts_the_cache(server: ChatServer,
                                                                    tmp_path: Path) -> None:
    root = project(tmp_path, server, samples=2)
    before = tree(root)
    out = cli(root, "predict", "--estimate").stdout
    assert server.records == []  # the server log is empty
    assert tree(root) == before  # no cache folder, no predictions, no report
    assert line(out, "RIMO-N").startswith(f"RIMO-N: {2 * N_CALLS} requests, 0 already cached")
    assert line(out, "RIMO-P").startswith(f"RIMO-P: {2 * P_CALLS} requests, 0 already cached")
    assert "characters / 4" in out and "100 tokens each" in out

    # Warm the cache for every sample, then estimate again: all cached, prompts exact.
    predictor = OpenAIPredictor(backend_section(
        "openai", yaml.safe_load((root / "params.yaml").read_text())["predict"]["openai"]))
    predictor.samples = 2
    sent = {}
    for track in TRACKS:
        predictor.predict(load_items(track, root / "data" / "items"))
        sent[track] = server.ok_records()
        server.reset()
    assert (len(sent[TRACK_N]), len(sent[TRACK_P])) == (2 * N_CALLS, 2 * P_CALLS)
    before = tree(root)
    out = cli(root, "predict", "--estimate").stdout
    assert server.records == [] and tree(root) == before
    for track, calls in ((TRACK_N, N_CALLS), (TRACK_P, P_CALLS)):
        # Independently: chars / 4 of every request the server actually received.
        tokens = sum(math.ceil(sum(len(m["content"]) for m in r.body["messages"]) / 4)
                     for r in sent[track])
        assert line(out, track) == (f"{track}: {2 * calls} requests, {2 * calls} already "
                                    f"cached, 0 to send; prompt tokens {tokens} (0 to send)")


def test_estimate_after_a_partial_run_counts_what_is_left(server: ChatServer,
                                                          tmp_path: Path) -> None:
    root = project(tmp_path, server, samples=1, price_per_mtok={"input": 2.0, "output": 8.0})
    predictor = OpenAIPredictor(backend_section(
        "openai", yaml.safe_load((root / "params.yaml").read_text())["predict"]["openai"]))
    items = load_items(TRACK_N, root / "data" / "items")
    predictor.predict(items[:3])
    server.reset()
    out = cli(root, "predict", "--estimate").stdout
    assert server.records == []
    assert line(out, "RIMO-N").startswith("RIMO-N: 4 requests, 3 already cached, 1 to send")
    assert line(out, "RIMO-P").startswith(f"RIMO-P: {P_CALLS} requests, 0 already cached")
    assert "estimated input cost" in out and "output at most $0.0064" in out  # 8 x 100 x 8/1e6


def test_predict_run_json_counts_sent_and_cached(server: ChatServer, tmp_path: Path) -> None:
    root = project(tmp_path, server, samples=1)
    cli(root, "predict")
    first = yaml.safe_load((root / PREDICT_RUN_PATH).read_text())
    assert (first["requests_sent"], first["cached_replies"]) == (N_CALLS + P_CALLS, 0)
    assert first[TRACK_N] == {"items": 4, "samples": 1, "requests_sent": N_CALLS,
                              "cached_replies": 0}
    assert first["wall_s"] >= 0 and first["backend"] == "openai"
    cli(root, "predict")
    second = yaml.safe_load((root / PREDICT_RUN_PATH).read_text())
    assert (second["requests_sent"], second["cached_replies"]) == (0, N_CALLS + P_CALLS)
    assert second[TRACK_P]["cached_replies"] == P_CALLS
    assert len(server.ok_records()) == N_CALLS + P_CALLS


def test_estimate_needs_no_api_key(server: ChatServer, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIMO_UNSET_KEY", raising=False)
    root = project(tmp_path, server, samples=1, base_url="https://api.example.invalid/v1",
                   api_key_env="RIMO_UNSET_KEY")
    out = cli(root, "predict", "--estimate").stdout
    assert line(out, "RIMO-N").startswith("RIMO-N: 4 requests, 0 already cached, 4 to send")
    # The real run does need it, and says which variable.
    proc = subprocess.run([sys.executable, "-m", "rimo_eval.cli", "predict"], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "RIMO_UNSET_KEY" in proc.stderr
