"""A batch-mode predict in a child process to kill -9 at a held phase of a fake batch API, and the
check that nothing was paid twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from rimo_eval.core.items import Item
from tests.support.batch_fake_base import BatchFake
from tests.support.fake_batch import FakeBatchServer
from tests.support.openai_batch import KEY_ENV, n_item, p_item
from tests.support.paths import REPO_ROOT

DRIVER = """
import json, sys
from dataclasses import asdict
from rimo_eval.core.items import Item
from {module} import {predictor} as Predictor
config, items_path, out_path = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
items = [Item(**{{**d, "sub_problems": tuple(d["sub_problems"]),
                 "sub_solutions": tuple(d["sub_solutions"])}}) for d in json.load(open(items_path))]
preds = Predictor(config).predict(items)
json.dump([asdict(p) for p in preds], open(out_path, "w"), sort_keys=True)
"""


ITEMS = [*(n_item(i) for i in range(5)), p_item(0, 3), p_item(1, 2)]


class Driver:
    """A predict in a child process, to kill at a held phase of a fake batch API."""

    def __init__(self, tmp_path: Path, cfg: dict[str, Any], items: list[Item],
                 predictor: str = "rimo_eval.predictors.openai_chat:OpenAIPredictor") -> None:
        (tmp_path / "config.json").write_text(json.dumps(cfg))
        (tmp_path / "items.json").write_text(json.dumps([asdict(it) for it in items]))
        module, name = predictor.split(":")
        (tmp_path / "driver.py").write_text(DRIVER.format(module=module, predictor=name))
        self.out = tmp_path / "out.json"
        self.argv = [sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "config.json"),
                     str(tmp_path / "items.json"), str(self.out)]
        self.env = {**os.environ, KEY_ENV: "sk-test"}

    def kill_at(self, fake: BatchFake, phase: str) -> None:
        fake.hold = {phase}
        proc = subprocess.Popen(self.argv, env=self.env, stderr=subprocess.DEVNULL)
        try:
            assert fake.held.wait(60), f"never reached {phase}"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        fake.hold = set()
        fake.release()
        assert not self.out.exists()

    def finish(self) -> list[dict[str, Any]]:
        subprocess.run(self.argv, env=self.env, check=True, stderr=subprocess.DEVNULL,
                       timeout=120)
        return json.loads(self.out.read_text())


def no_double_pay(fake: FakeBatchServer) -> None:
    assert fake.violations == []  # no live duplicate, nothing answered 200 re-submitted
    assert set(fake.answered_ok().values()) == {1}
    assert len(fake.answered_ok()) == 5 + 3 + 2


def params_file(tmp_path: Path, fake: BatchFake, backend: str = "openai",
                key_env: str = KEY_ENV) -> Path:
    """The project's params.yaml with ``backend``'s section pointed at ``fake``."""
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    params["predict"]["backend"] = backend
    params["predict"][backend].update(base_url=fake.base_url, model="fake-model",
                                      api_key_env=key_env, cache_dir=str(tmp_path / "cache"))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path
