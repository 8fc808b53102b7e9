"""A run caught in the middle of predict, for ``rimo-eval view --partial``: a small project (git +
DVC, eight items, the openai backend in front of the fake chat server, k samples), the real
``rimo-eval predict`` CLI started in it and stalled after a known number of replies (the server
then hangs every request), and an independent reading of what the response cache holds.

The independent reading opens the SQLite file with ``sqlite3`` and ``zstandard`` and grades
with a regular expression: none of rimo-eval's cache, transport, protocol or score code."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
import zstandard

from tests.support.chat_server import ChatServer
from tests.support.factories import n_item, p_item, write_items
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import sh

CONCURRENCY = 2
# (problem id, gold, the directive that decides the reply): right, wrong, no box, cut off.
N_ITEMS = [("2001a1", "12", "[[gold:12]]"), ("2001a2", "-3", "[[gold:5]]"),
           ("2001c1", "7", ""), ("2001c2", "100", "[[truncate]]")]


def _with_problem(row: dict[str, Any], problem: str) -> dict[str, Any]:
    from rimo_eval.io.hashing import fingerprint

    row = {k: v for k, v in row.items() if k != "content_hash"} | {"problem": problem}
    return {**row, "content_hash": fingerprint(row)}


def project(root: Path, server: ChatServer, samples: int) -> Path:
    """A git + DVC project with validated items and params.yaml for an openai run."""
    root.mkdir(parents=True, exist_ok=True)
    write_items(root / "data" / "items",
                [_with_problem(n_item(pid, gold), f"Problem {pid}? {d}")
                 for pid, gold, d in N_ITEMS],
                [p_item("2001a1", ["s1"]), p_item("2001g1", ["g1", "g2"]),
                 p_item("2001n1", ["n1", "n2", "n3"]), p_item("2005p3", [""], gradable=False)])
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    params["predict"].update({"backend": "openai", "limit": None, "samples": samples,
                              "openai": {"base_url": server.base_url, "model": "fake-model",
                                         "api_key_env": None, "cache_dir": ".rimo_cache/r",
                                         "max_tokens": 100, "concurrency": CONCURRENCY}})
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    sh(root, "git", "init", "-q")
    sh(root, "dvc", "init", "-q")
    return root


def commit_pipeline(root: Path) -> None:
    """A predict stage over the items and params, all committed: what ``dvc exp run --queue``
    stashes an experiment on."""
    (root / "dvc.yaml").write_text(
        "stages:\n  predict:\n    cmd: rimo-eval predict\n    deps: [data/items]\n"
        "    params: [predict]\n    outs: [data/predictions]\n")
    (root / ".gitignore").write_text("/.rimo_cache/\n/data/predictions/\n/reports/\n")
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-qm", "pipeline")


def cli(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "rimo_eval.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=check)


def stalled_predict(root: Path, server: ChatServer, answers: int) -> subprocess.Popen[bytes]:
    """``rimo-eval predict`` in ``root``, returned once ``answers`` replies are in its cache
    and every slot hangs: a run in progress (the caller kills it)."""
    server.hang_after = answers
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "rimo_eval.cli", "predict"], cwd=root,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        hanging = [r for r in server.records if r.outcome == "hanging"]
        busy = [r for r in server.records if r.outcome == "pending"]
        if (len(hanging) == CONCURRENCY and not busy
                and len(cache_entries(root)) == len(server.ok_records()) >= answers):
            return proc
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"predict never stalled (exit {proc.poll()})")
        time.sleep(0.05)


def cache_entries(root: Path) -> list[dict[str, Any]]:
    """Every stored ``{"request", "response"}`` of the project's response cache."""
    db = root / ".rimo_cache/r/responses.sqlite3"
    if not db.exists():
        return []
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT data FROM entries").fetchall()
    finally:
        conn.close()
    return [json.loads(zstandard.ZstdDecompressor().decompress(r[0])) for r in rows]


def independent_outcomes(root: Path) -> dict[tuple[str, int], str]:
    """(RIMO-N problem id, sample) -> "R" or "W" for every RIMO-N reply in the cache: the last
    ``\\boxed{...}`` (no nesting in these replies) against the gold."""
    gold = {pid: g for pid, g, _ in N_ITEMS}
    out = {}
    for entry in cache_entries(root):
        prompt = entry["request"]["request"]["messages"][-1]["content"]
        pid = next((p for p in gold if f"Problem {p}?" in prompt), None)
        if pid is None:
            continue
        text = entry["response"]["texts"][0]
        boxes = re.findall(r"\\boxed\{([^{}]*)\}", text)
        out[(pid, int(entry["request"].get("sample", 0)))] = \
            "R" if boxes and boxes[-1].strip() == gold[pid] else "W"
    return out


def site_index(site: Path) -> dict[str, Any]:
    text = (site / "data/index.js").read_text()
    assert text.startswith("RIMO.index(") and text.endswith(");\n")
    index: dict[str, Any] = json.loads(text[len("RIMO.index("):-3])
    return index


def site_item(site: Path, n: int) -> dict[str, Any]:
    text = (site / f"data/items/{n:05d}.js").read_text()
    assert text.startswith("RIMO.item(") and text.endswith(");\n")
    # RIMO.item(n, payload, texts): the texts are packed apart (view/packing.py).
    payload: dict[str, Any] = json.loads(f"[{text[len('RIMO.item('):-3]}]")[1]
    return payload


def tree_bytes(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes()
            for p in sorted(site.rglob("*")) if p.is_file()}
