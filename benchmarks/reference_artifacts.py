"""Digests of the artifacts of two reference runs, to prove a refactor changed no byte.

Run it before and after a change (or in two checkouts) and diff the two JSON files:

* a full oracle run (791 items): fetch, validate, predict, score, judge (off), audit;
* a k = 3 run of the openai backend against the loopback fake server on a fixed port (all 791
  items, seed 7, 8463 requests), then score, audit, and the judge on with a scripted judge.

Each run goes through the real CLI in a temporary git repo (``tests/pipeline_repo``). Digested:
every file under data/items, data/predictions, data/scores, data/judge and reports (but
``predict_run.json``, which holds wall times), and the response cache (names and entries,
latency left out). metrics.json's provenance pointer and provenance.json's commit name the
temporary repo's commit, so they are left out of those two files' digests.

    RIMO_MIRROR=../shared/rimo/upstream .venv/bin/python benchmarks/reference_artifacts.py OUT.json
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chat_server import ChatServer  # noqa: E402
from tests.conftest import find_mirror  # noqa: E402
from tests.judge_setup import hashed_reply  # noqa: E402
from tests.pipeline_repo import make_repo, sh  # noqa: E402

PORT = 18777  # fixed: the base URL is part of every cache key
DIRS = ("data/items", "data/predictions", "data/scores", "data/judge", "reports")


def _normalised(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name == "metrics.json":
        return json.dumps({k: v for k, v in json.loads(data).items()
                           if k != "provenance"}).encode()
    if path.name == "provenance.json":
        return re.sub(rb'"commit": "[0-9a-f]{40}"', b"", data)
    return data


def digest_tree(root: Path) -> dict[str, str]:
    out = {str(p.relative_to(root)): hashlib.sha256(_normalised(p)).hexdigest()
           for sub in DIRS for p in sorted((root / sub).rglob("*"))
           if p.is_file() and p.name != "predict_run.json"}
    cache = root / "cache"
    if cache.is_dir():
        h, n = hashlib.sha256(), 0
        for p in sorted(cache.rglob("*.json")):
            entry = json.loads(p.read_text())
            entry.get("response", entry).pop("latency_s", None)
            h.update(p.name.encode() + json.dumps(entry, sort_keys=True).encode())
            n += 1
        out["cache"] = f"{n} entries {h.hexdigest()}"
    return out


def run(root: Path, stages: list[str], audit: bool = True) -> dict[str, Any]:
    log: dict[str, Any] = {}
    for stage in stages + (["audit"] if audit else []):
        proc = sh(root, "rimo-eval", stage, check=False)
        log[stage] = proc.returncode
        if proc.returncode:
            log[f"{stage}:out"] = re.sub(r"commit [0-9a-f]+", "commit C",
                                         (proc.stdout + proc.stderr)[-800:])
    return log


def main(out_path: str) -> None:
    mirror = find_mirror()
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = make_repo(Path(tmp) / "oracle", mirror)
        result["oracle_log"] = run(root, ["fetch", "validate", "predict", "score", "judge"])
        result["oracle"] = digest_tree(root)
    server = ChatServer().start(PORT)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            openai = yaml.safe_load((ROOT / "params.yaml").read_text())["predict"]["openai"]
            root = make_repo(Path(tmp) / "k3", mirror, {
                "backend": "openai", "limit": None, "samples": 3,
                "openai": {**openai, "base_url": server.base_url, "model": "m",
                           "cache_dir": "cache", "concurrency": 16, "seed": 7}})
            params = yaml.safe_load((root / "params.yaml").read_text())
            params["score"]["pass_at"] = [1, 2, 3]
            (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
            sh(root, "git", "commit", "-qam", "k3")
            log = run(root, ["fetch", "validate", "predict", "score"])
            server.responder = hashed_reply
            params["judge"].update(enabled=True, base_url=server.base_url, model="judge-model",
                                   cache_dir="cache")
            (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
            log.update({f"j:{k}": v for k, v in run(root, ["judge"], audit=False).items()})
            result["k3_log"] = log
            result["k3"] = digest_tree(root)
    finally:
        server.stop()
    Path(out_path).write_text(json.dumps(result, indent=1, sort_keys=True))
    print(json.dumps({k: v for k, v in result.items() if k.endswith("log")}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
