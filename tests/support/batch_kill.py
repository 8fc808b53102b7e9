"""A batch-mode predict in a child process to kill -9 at a held phase of a fake batch API, and the
check that nothing was paid twice."""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import yaml

from rimo_eval.artifacts.items import Item
from tests.support.batch_fake_base import BatchFake
from tests.support.factories import backend_section
from tests.support.fake_batch import FakeBatchServer
from tests.support.openai_batch import KEY_ENV, n_item, p_item
from tests.support.paths import REPO_ROOT

# Children are forked from a server that imported the predictors once (multiprocessing's
# forkserver), not started afresh: each kill round used to pay a whole interpreter start and the
# anthropic SDK's import (1-3 s of CPU). A forked child dies by SIGKILL all the same.
_PRELOAD = ["rimo_eval.predictors.openai_chat", "rimo_eval.predictors.native_chat",
            "tests.support.batch_kill"]
_CTX = multiprocessing.get_context("forkserver")
_CTX.set_forkserver_preload(_PRELOAD)


def _run_predict(predictor: str, env: dict[str, str], config_path: str, items_path: str,
                 out_path: str) -> None:
    """The child: the predictor's predict over the items, written to ``out_path``."""
    os.environ.clear()
    os.environ.update(env)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    module, name = predictor.split(":")
    cls = getattr(importlib.import_module(module), name)
    config = json.loads(Path(config_path).read_text())
    items = [Item(**{**d, "sub_problems": tuple(d["sub_problems"]),
                     "sub_solutions": tuple(d["sub_solutions"])})
             for d in json.loads(Path(items_path).read_text())]
    preds = cls(backend_section(cls.name, config)).predict(items)
    Path(out_path).write_text(json.dumps([asdict(p) for p in preds], sort_keys=True))


ITEMS = [*(n_item(i) for i in range(5)), p_item(0, 3), p_item(1, 2)]


class Driver:
    """A predict in a child process, to kill at a held phase of a fake batch API."""

    def __init__(self, tmp_path: Path, cfg: dict[str, Any], items: list[Item],
                 predictor: str = "rimo_eval.predictors.openai_chat:OpenAIPredictor") -> None:
        (tmp_path / "config.json").write_text(json.dumps(cfg))
        (tmp_path / "items.json").write_text(json.dumps([asdict(it) for it in items]))
        self.out = tmp_path / "out.json"
        self.args = (predictor, {**os.environ, KEY_ENV: "sk-test"}, str(tmp_path / "config.json"),
                     str(tmp_path / "items.json"), str(self.out))

    def _start(self) -> multiprocessing.process.BaseProcess:
        proc = _CTX.Process(target=_run_predict, args=self.args, daemon=True)
        proc.start()
        return proc

    def kill_at(self, fake: BatchFake, phase: str) -> None:
        fake.hold = {phase}
        proc = self._start()
        try:
            assert fake.held.wait(60), f"never reached {phase}"
        finally:
            proc.kill()  # SIGKILL
            proc.join()
        fake.hold = set()
        fake.release()
        assert not self.out.exists()

    def finish(self) -> list[dict[str, Any]]:
        proc = self._start()
        proc.join(120)
        if proc.is_alive():
            proc.kill()
            proc.join()
            raise AssertionError("predict ran past 120 s")
        assert proc.exitcode == 0, f"predict exited {proc.exitcode}"
        return cast(list[dict[str, Any]], json.loads(self.out.read_text()))


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
