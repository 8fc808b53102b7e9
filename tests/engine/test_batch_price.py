"""The Batch API's price: ``--estimate`` shows it, and the cost in metrics.json applies
``predict.<backend>.batch.discount`` (openai, anthropic) and says so (``cost_batch_discount``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rimo_eval.params.config import PredictParams, load_params
from rimo_eval.predict import estimate
from rimo_eval.score.samples import price, usage
from tests.support.chat_server import ChatServer
from tests.support.estimate_project import cli, project
from tests.support.factories import predict_section, section, small_benchmark
from tests.support.paths import REPO_ROOT


def test_estimate_shows_the_batch_price(server: ChatServer, tmp_path: Path) -> None:
    root = project(tmp_path, server, samples=1, price_per_mtok={"input": 2.0, "output": 8.0},
                   batch={"enabled": True, "discount": 0.5})
    out = cli(root, "predict", "--estimate").stdout
    assert "at the batch price (x0.5)" in out and "output at most $0.0044" in out  # 11x100x8/2
    assert server.records == []
    online = project(tmp_path / "o", server, samples=1,
                     price_per_mtok={"input": 2.0, "output": 8.0})
    assert "output at most $0.0088" in cli(online, "predict", "--estimate").stdout


@pytest.mark.parametrize("backend", ["openai", "anthropic"])  # Batch API, Message Batches
def test_metrics_cost_applies_and_names_the_batch_price(backend: str) -> None:
    preds = pd.DataFrame({"backend": [backend], "status": ["ok"], "details": [json.dumps(
        {"usage": {"prompt_tokens": 1000, "completion_tokens": 500}, "requests": 1})]})
    per_mtok = {"input": 2.0, "output": 10.0}
    defaults = load_params(REPO_ROOT / "params.yaml").predict
    discount = getattr(defaults, backend).batch.discount  # params.yaml's: 0.5 for both
    cfg = {"backend": backend, backend: {"price_per_mtok": per_mtok,
                                         "batch": {"enabled": True, "discount": discount}}}
    batch = usage(preds, price(section(PredictParams, "predict", cfg), preds))
    assert batch["cost_usd"] == round(0.5 * (1000 * 2.0 + 500 * 10.0) / 1e6, 6)
    assert batch["cost_batch_discount"] == 0.5
    cfg[backend]["batch"]["enabled"] = False
    online = usage(preds, price(section(PredictParams, "predict", cfg), preds))
    assert online["cost_usd"] == 2 * batch["cost_usd"] and "cost_batch_discount" not in online


def test_estimate_shows_the_message_batches_price(tmp_path: Path) -> None:
    small_benchmark(tmp_path / "items")
    section = {"model": "claude-fake", "api_key_env": None, "cache_dir": str(tmp_path / "c"),
               "max_tokens": 100, "price_per_mtok": {"input": 2.0, "output": 8.0}}
    cfg = {"backend": "anthropic", "limit": None, "anthropic": section}
    online = estimate(predict_section(cfg), tmp_path / "items")
    assert "batch price" not in online and "output at most $0.0088" in online  # 11x100x8
    batched = {**section, "batch": {"enabled": True}}  # discount 0.5 by default
    out = estimate(predict_section({**cfg, "anthropic": batched}), tmp_path / "items")
    assert "at the batch price (x0.5)" in out and "output at most $0.0044" in out
    assert not (tmp_path / "c").exists()  # sends nothing, writes nothing


def test_the_price_reads_the_validated_params(tmp_path: Path) -> None:
    # The score stage hands score() the validated sections (issue 31 §5): the price and its
    # batch discount are read from the typed predict section; a bad price is refused when the
    # file is read, naming its key.
    import yaml

    from rimo_eval.errors import ConfigError

    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    raw["predict"]["openai"].update(price_per_mtok={"input": 2, "output": 10},
                                    batch={"enabled": True})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    typed = load_params(tmp_path / "params.yaml")
    preds = pd.DataFrame({"backend": ["openai"], "status": ["ok"], "details": ["{}"]})
    want = {"input": 2.0, "output": 10.0, "batch_discount": 0.5}
    assert price(typed.predict, preds) == want
    assert price(None, preds) is None  # no predict section: not priced
    raw["predict"]["openai"]["price_per_mtok"]["input"] = -1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"predict\.openai\.price_per_mtok"):
        load_params(tmp_path / "params.yaml")
