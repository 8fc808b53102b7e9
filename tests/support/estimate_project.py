"""A project folder for the predict CLI in front of the fake chat server, and the CLI to run in
it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.support.chat_server import ChatServer
from tests.support.factories import small_benchmark
from tests.support.paths import REPO_ROOT


def project(tmp_path: Path, server: ChatServer, samples: int, **openai: Any) -> Path:
    small_benchmark(tmp_path / "data" / "items")
    cfg = {"base_url": server.base_url, "model": "fake-model", "api_key_env": None,
           "cache_dir": str(tmp_path / "cache"), "max_tokens": 100, **openai}
    # The CLI validates the whole file: start from the project's own params.
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    params["predict"].update({"backend": "openai", "limit": None, "samples": samples,
                              "openai": cfg})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    return tmp_path


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "rimo_eval.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
