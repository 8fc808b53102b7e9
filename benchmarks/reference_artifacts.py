"""Digests of the artifacts of two reference runs, to prove a refactor changed no byte.

Run it before and after a change (or in two checkouts) and diff the two JSON files:

* a full oracle run (791 items): fetch, validate, predict, score, judge (off), audit;
* a k = 3 run of the openai backend against the loopback fake server on a fixed port (all 791
  items, seed 7, 8463 requests), then score, audit, and the judge on with a scripted judge.

Each run goes through the real CLI in a temporary git repo (``tests/support/pipeline_repo``).
Digested: every file under data/items, data/predictions, data/scores, data/judge and reports (but
``predict_run.json``, which holds wall times), and, for the k = 3 run, the requests the fake
server answered (their canonical JSON, sorted: what was sent, whatever layout the response
cache stores it in). metrics.json's provenance pointer and provenance.json's commit name the
temporary repo's commit, so they are left out of those two files' digests.

    RIMO_MIRROR=../shared/rimo/upstream .venv/bin/python benchmarks/reference_artifacts.py OUT.json
    .venv/bin/python benchmarks/reference_artifacts.py --quick [OUT.json]   # 3 items per track
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from predict_throughput import find_mirror  # noqa: E402

from tests.support.chat_server import ChatServer  # noqa: E402
from tests.support.judge_setup import hashed_reply  # noqa: E402
from tests.support.pipeline_repo import make_repo, sh  # noqa: E402

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
    return {str(p.relative_to(root)): hashlib.sha256(_normalised(p)).hexdigest()
            for sub in DIRS for p in sorted((root / sub).rglob("*"))
            if p.is_file() and p.name != "predict_run.json"}


def digest_requests(server: ChatServer) -> str:
    """The requests the server answered, as a multiset: their count and one digest."""
    bodies = sorted(json.dumps(r.body, sort_keys=True) for r in server.ok_records())
    h = hashlib.sha256()
    for body in bodies:
        h.update(hashlib.sha256(body.encode()).digest())
    return f"{len(bodies)} requests {h.hexdigest()}"


def run(root: Path, stages: list[str], audit: bool = True) -> dict[str, Any]:
    log: dict[str, Any] = {}
    for stage in stages + (["audit"] if audit else []):
        proc = sh(root, "rimo-eval", stage, check=False)
        log[stage] = proc.returncode
        if proc.returncode:
            log[f"{stage}:out"] = re.sub(r"commit [0-9a-f]+", "commit C",
                                         (proc.stdout + proc.stderr)[-800:])
    return log


def main(out_path: str | None, limit: int | None) -> None:
    mirror = find_mirror()
    result: dict[str, Any] = {"limit": limit}
    with tempfile.TemporaryDirectory() as tmp:
        root = make_repo(Path(tmp) / "oracle", mirror, {"backend": "oracle", "limit": limit})
        result["oracle_log"] = run(root, ["fetch", "validate", "predict", "score", "judge"])
        result["oracle"] = digest_tree(root)
    server = ChatServer().start(PORT)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            openai = yaml.safe_load((ROOT / "params.yaml").read_text())["predict"]["openai"]
            root = make_repo(Path(tmp) / "k3", mirror, {
                "backend": "openai", "limit": limit, "samples": 3,
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
            result["k3"] = {**digest_tree(root), "requests": digest_requests(server)}
    finally:
        server.stop()
    if out_path:
        Path(out_path).write_text(json.dumps(result, indent=1, sort_keys=True))
    print(json.dumps({k: v for k, v in result.items() if k.endswith("log")}, indent=1))
    print(f"digested {len(result['oracle'])} oracle files and {len(result['k3'])} k = 3 entries"
          f"; k = 3 {result['k3']['requests']}" + (f"; written to {out_path}" if out_path else ""))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="JSON file for the digests (default: none)")
    parser.add_argument("--limit", type=int, default=None, help="items per track (default: all)")
    parser.add_argument("--quick", action="store_true", help="tiny: 3 items per track")
    args = parser.parse_args()
    main(args.out, 3 if args.quick else args.limit)
