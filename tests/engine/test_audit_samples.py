"""``rimo-eval audit`` on a real k = 3 run against the loopback chat server (issue 20): the
fingerprint it recomputes from params must be the one the predict stage recorded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.commands.audit.content import check_fingerprint
from rimo_eval.commands.audit.ledger import Ledger
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACKS
from tests.support.chat_server import ChatServer
from tests.support.factories import predict_section, small_benchmark
from tests.support.paths import REPO_ROOT

KEY_ENV = "RIMO_TEST_AUDIT_KEY"


@pytest.fixture
def server() -> Iterator[ChatServer]:
    srv = ChatServer().start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("samples", [1, 3])
def test_audit_recomputes_the_fingerprint_of_a_k_sample_openai_run(
        server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        samples: int) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-audit")
    small_benchmark(tmp_path / "data/items")
    cfg = {"backend": "openai", "samples": samples,
           "openai": {"base_url": server.base_url, "model": "fake", "api_key_env": KEY_ENV,
                      "cache_dir": str(tmp_path / "cache"), "temperature": 0.6, "seed": 3}}
    predict(predict_section(cfg), tmp_path / "data/items", tmp_path / "data/predictions")
    assert len(server.ok_records()) == samples * (4 + 1 + 2 + 3 + 1)  # 4 RIMO-N, 7 parts
    ledger = Ledger()
    for track in TRACKS:
        preds = pd.read_parquet(predictions_path(track, tmp_path / "data/predictions"))
        assert sorted(set(preds["sample"])) == list(range(samples))
        check_fingerprint(ledger, tmp_path, preds, track, predict_section(cfg))
    assert not ledger.breaks, [c.message for c in ledger.breaks]
    assert [c.check for c in ledger.checks] == ["predictions.fingerprint"] * 2
    # And it still catches a run made with other settings.
    other = {**cfg, "samples": samples + 1}
    check_fingerprint(ledger, tmp_path, preds, "p", predict_section(other))
    [broken] = ledger.breaks
    assert "does not recompute" in broken.message


@pytest.mark.slow
def test_rimo_eval_audit_passes_on_a_dvc_repro_k3_fake_server_run(
        server: ChatServer, tmp_path: Path, mirror_dir: Path) -> None:
    """The whole command, as issue 20 reported it: exit 0 and no fingerprint break."""
    import yaml

    from tests.support.pipeline_repo import make_repo, sh

    openai = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["predict"]["openai"]
    root = make_repo(tmp_path / "k3", mirror_dir, {
        "backend": "openai", "limit": 3, "samples": 3,
        "openai": {**openai, "base_url": server.base_url, "model": "fake", "api_key_env": None,
                   "cache_dir": "cache", "temperature": 0.6, "seed": 1}})
    # Up to score: the stages audit checks (the judge, view and report only read the metrics).
    sh(root, "dvc", "repro", "-q", "score")
    audit = sh(root, "rimo-eval", "audit", check=False)
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-2000:]
    assert "fingerprint" in audit.stdout and "does not recompute" not in audit.stdout
