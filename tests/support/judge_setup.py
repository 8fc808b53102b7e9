"""Inputs for the judge tests: real or small items, predictions and scores in a project layout,
and a scripted judge for the loopback server (``chat_server.ChatServer.responder``)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml

from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.score.stage import score
from rimo_eval.validate.stage import run as validate
from tests.support.chat_server import ChatServer
from tests.support.factories import params, predict_section, section
from tests.support.paths import REPO_ROOT

KEY_ENV = "RIMO_TEST_JUDGE_KEY"
SECRET = "sk-judge-test-4b1d7e0c9a2f83SECRET"

_CANDIDATE = re.compile(r"Candidate solution of sub-problem (\d+) of (\d+):\n(.*)\Z", re.DOTALL)
_PROBLEM = re.compile(r"\nProblem:\n(.*?)\n\nOfficial complete solution:\n", re.DOTALL)


def candidate_of(prompt: str) -> str:
    m = _CANDIDATE.search(prompt)
    assert m, f"not a judge prompt: {prompt[:200]!r}"
    return m.group(3)


def problem_of(prompt: str) -> str:
    m = _PROBLEM.search(prompt)
    assert m, f"not a judge prompt: {prompt[:200]!r}"
    return m.group(1)


def verdict_json(verdict: str, reason: str = "scripted") -> str:
    return json.dumps({"verdict": verdict, "reason": reason})


def hashed_verdict(problem: str, candidate: str) -> str:
    """A judge that is neither always right nor always wrong, but a known function of its input:
    correct, incorrect or an unparsable reply."""
    digest = int(hashlib.sha256(f"{problem}\0{candidate}".encode()).hexdigest(), 16) % 3
    return ("incorrect", "correct", "unparsable")[digest]


def hashed_reply(_body: dict[str, Any], prompt: str) -> str:
    verdict = hashed_verdict(problem_of(prompt), candidate_of(prompt))
    return "no idea, sorry" if verdict == "unparsable" else verdict_json(verdict)


def project(root: Path, mirror: Path, limit: int | None, predict_cfg: dict | None = None
            ) -> Path:
    """data/items, data/predictions, data/scores under ``root`` from the real upstream files."""
    data = root / "data"
    validate(params(validate={"errata": str(REPO_ROOT / "data/errata.yaml")}), raw_dir=mirror,
             items_dir=data / "items", report_path=root / "reports/validation.json")
    scored(root, predict_cfg or {"backend": "oracle", "limit": limit})
    return root


def scored(root: Path, predict_cfg: dict[str, Any]) -> None:
    data = root / "data"
    predict(predict_section(predict_cfg), items_dir=data / "items", out_dir=data / "predictions")
    score(section(ScoreParams, "score",
                  bootstrap={"samples": 200, "seed": 0, "confidence": 0.95}),
          items_dir=data / "items", preds_dir=data / "predictions", scores_dir=data / "scores",
          metrics_path=root / "reports/metrics.json", plots_dir=root / "reports/plots")


def judge_cfg(server: ChatServer, root: Path, **overrides: Any) -> dict[str, Any]:
    cfg = {"enabled": True, "base_url": server.base_url, "model": "judge-model",
           "api_key_env": KEY_ENV, "cache_dir": str(root / "cache"), "timeout_s": 10.0,
           "max_retries": 1, "backoff_initial_s": 0.01, "backoff_max_s": 0.02, "concurrency": 4}
    return {**cfg, **overrides}


def judge_paths(root: Path) -> dict[str, Path]:
    data = root / "data"
    return {"items_dir": data / "items", "preds_dir": data / "predictions",
            "scores_dir": data / "scores", "table_path": data / "judge/rimo_p.parquet",
            "metrics_path": root / "reports/judge.json"}


def write_params(root: Path, judge: dict[str, Any]) -> None:
    """The project's params.yaml with ``judge`` replaced: the CLI validates the whole file."""
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    (root / "params.yaml").write_text(yaml.safe_dump({**params, "judge": judge}),
                                      encoding="utf-8")
