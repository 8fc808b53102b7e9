"""Every audit check can fail: each one, on a real pipeline run, is broken by a real corruption
of the file it guards, and a clean run passes every one of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from rimo_eval.artifacts.paths import (
    BREAKDOWN_PATH,
    JUDGE_TABLE,
    LOCK_PATH,
    METRICS_PATH,
    PARAMS_PATH,
    PROVENANCE_PATH,
    RAW_DIR,
    items_path,
    plot_path,
    predictions_path,
    scores_path,
)
from rimo_eval.artifacts.predictions import PREDICTION_SCHEMAS
from rimo_eval.commands.audit.ledger import CHECKS
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.stage import SCORE_SCHEMAS
from tests.support.in_process import audit_cli
from tests.support.pipeline_repo import copy_repo, sh

PRED_N = predictions_path(TRACK_N).as_posix()
TOUCHED = [LOCK_PATH, PARAMS_PATH, METRICS_PATH, BREAKDOWN_PATH, PROVENANCE_PATH,
           RAW_DIR / "RIMO-N.csv", items_path(TRACK_N), predictions_path(TRACK_N),
           scores_path(TRACK_N), plot_path(TRACK_P), JUDGE_TABLE]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, oracle_run: Path) -> Path:
    repo = copy_repo(oracle_run, tmp_path_factory.mktemp("checks") / "repo")
    return repo


def audit_json(repo: Path, cli: bool = False) -> dict[str, Any]:
    """The report of ``rimo-eval audit --json``: the installed command when ``cli``, else the
    same CLI entry in-process (tests.support.in_process)."""
    proc = (sh(repo, "rimo-eval", "audit", "--json", check=False) if cli
            else audit_cli(repo, "--json"))
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is (proc.returncode == 0)
    return report


# --- corruptions: each edits what one check guards, the way a hand edit or a stale file would


def _rewrite(repo: Path, rel: Path, schema: pa.Schema | None,
             edit: Callable[[pd.DataFrame], None]) -> None:
    path = repo / rel
    df = pd.read_parquet(path)
    edit(df)
    schema = schema or pq.read_schema(path)
    pq.write_table(pa.Table.from_pandas(df, schema=schema, preserve_index=False), path)


def _json(repo: Path, rel: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads((repo / rel).read_text())
    edit(data)
    (repo / rel).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _metrics(repo: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    _json(repo, METRICS_PATH, edit)


def _provenance(repo: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    _json(repo, PROVENANCE_PATH, edit)


def _yaml(repo: Path, rel: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    data = yaml.safe_load((repo / rel).read_text())
    edit(data)
    (repo / rel).write_text(yaml.safe_dump(data, sort_keys=False))


def _set(**values: Any) -> Callable[[pd.DataFrame], None]:
    def edit(df: pd.DataFrame) -> None:
        for col, (row, value) in values.items():
            if row is None:
                df[col] = value
            else:
                df.loc[row, col] = value
    return edit


def _lock_md5(data: dict[str, Any]) -> None:
    data["stages"]["validate"]["outs"][0]["md5"] = "0" * 32


def _seed(data: dict[str, Any]) -> None:
    data["score"]["bootstrap"]["seed"] = 7


def _append(repo: Path, rel: Path) -> None:
    with open(repo / rel, "a", encoding="utf-8") as fh:
        fh.write("\n")


CORRUPT: dict[str, Callable[[Path], None]] = {
    "lock.present": lambda r: (r / LOCK_PATH).unlink(),
    "lock.md5": lambda r: _yaml(r, LOCK_PATH, _lock_md5),
    "lock.params": lambda r: _yaml(r, PARAMS_PATH, _seed),
    "upstream.sha256": lambda r: _append(r, RAW_DIR / "RIMO-N.csv"),
    # An answer edited in place, its content_hash left as it was.
    "items.content_hash": lambda r: _rewrite(r, items_path(TRACK_N), None,
                                             _set(answer=(3, "-1"))),
    "predictions.one_run": lambda r: _rewrite(r, predictions_path(TRACK_N),
                                              PREDICTION_SCHEMAS[TRACK_N],
                                              _set(fingerprint=(0, "f" * 64))),
    "predictions.backend": lambda r: _rewrite(r, predictions_path(TRACK_N),
                                              PREDICTION_SCHEMAS[TRACK_N],
                                              _set(backend=(None, "constant"))),
    # A consistent file from another configuration: one fingerprint, not the oracle's.
    "predictions.fingerprint": lambda r: _rewrite(r, predictions_path(TRACK_N),
                                                  PREDICTION_SCHEMAS[TRACK_N],
                                                  _set(fingerprint=(None, "e" * 64))),
    "predictions.items": lambda r: _rewrite(r, predictions_path(TRACK_N),
                                            PREDICTION_SCHEMAS[TRACK_N],
                                            _set(item_hash=(5, "0" * 64))),
    "scores.recompute": lambda r: _rewrite(r, scores_path(TRACK_N), SCORE_SCHEMAS[TRACK_N],
                                           _set(correct=(2, False))),
    "metrics.recompute": lambda r: _metrics(r, lambda m: m[TRACK_N].update(correct=1)),
    "plots.recompute": lambda r: _append(r, plot_path(TRACK_P)),
    # The judge's record without the table it was computed from.
    "judge.recompute": lambda r: (r / JUDGE_TABLE).unlink(),
    # metrics.json naming another provenance file than the one beside it.
    "provenance.pointer": lambda r: _metrics(r, lambda m: m["provenance"].__setitem__(1, "0" * 64)),
    "provenance.block": lambda r: (r / PROVENANCE_PATH).unlink(),
    "provenance.sha256": lambda r: _provenance(
        r, lambda m: m["inputs"].update({PRED_N: "0" * 64})),
    "provenance.predictions": lambda r: _provenance(
        r, lambda m: m["predictions"][TRACK_N].update(backend="constant")),
    "provenance.upstream": lambda r: _provenance(
        r, lambda m: m["upstream"].update(revision="main")),
    "provenance.params": lambda r: _provenance(
        r, lambda m: m["params"]["score"]["bootstrap"].update(seed=3)),
    "provenance.params_fingerprint": lambda r: _provenance(
        r, lambda m: m.update(params_fingerprint="0" * 64)),
}


def test_every_check_has_a_corruption() -> None:
    assert sorted(CORRUPT) == sorted(CHECKS)


@pytest.mark.slow
def test_clean_run_passes_every_check(repo: Path) -> None:
    report = audit_json(repo, cli=True)
    assert report["ok"] and report["breaks"] == []
    # Each check ran and passed at least once; none only ever warned.
    assert sorted(report["by_check"]) == sorted(CHECKS)
    assert all(c["ok"] > 0 and c["break"] == 0 for c in report["by_check"].values())
    assert report["checks"] == sum(sum(c.values()) for c in report["by_check"].values())


@pytest.mark.slow
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_each_check_fails_on_its_corruption(repo: Path, check: str) -> None:
    saved = {rel: (repo / rel).read_bytes() for rel in TOUCHED}
    try:
        CORRUPT[check](repo)
        report = audit_json(repo)
        assert not report["ok"]
        broken = {b["check"] for b in report["breaks"]}
        assert check in broken, (check, broken)
        # The break is a counted check, and its message names a file.
        assert report["by_check"][check]["break"] >= 1
        mine = [b for b in report["breaks"] if b["check"] == check]
        assert all(b["path"] and b["path"] in b["message"] for b in mine)
    finally:
        for rel, data in saved.items():
            (repo / rel).write_bytes(data)
