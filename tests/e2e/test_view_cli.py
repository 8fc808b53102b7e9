"""``rimo-eval view`` on two real experiments: counts and flips equal metrics.json and
``rimo-eval compare``; a run missing from the DVC cache is an error naming files and pull."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.pipeline_repo import sh
from tests.support.view_runs import copy_runs


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, view_runs_base: dict[str, Any]
             ) -> dict[str, Any]:
    return copy_runs(view_runs_base, tmp_path_factory.mktemp("view_site"))


def read_index(site: Path) -> dict[str, Any]:
    text = (site / "data/index.js").read_text()
    assert text.startswith("RIMO.index(") and text.endswith(");\n")
    return json.loads(text[len("RIMO.index("):-3])


@pytest.mark.slow
def test_cli_site_counts_and_flips_equal_metrics_and_compare(two_runs: dict[str, Any]) -> None:
    repo = two_runs["repo"]
    # Named runs go to their own folder by default, never the view stage's reports/view/ that
    # the workspace's report links to (issue 29 §4).
    sh(repo, "rimo-eval", "view", "run-a", "run-b")
    site = repo / "reports/views/run-a+run-b"
    assert not (repo / "reports/view").exists()
    index = read_index(site)
    assert len(index["items"]) == two_runs["n_items"] == 791
    assert len(list((site / "data/items").glob("*.js"))) == 791
    result = json.loads(sh(repo, "rimo-eval", "compare", "run-a", "run-b", "--json").stdout)
    metrics = {m["name"]: (m["a"], m["b"]) for m in result["metrics"]}
    for i, side in enumerate(("a", "b")):
        right_n = sum(it["o"][i][0] == "R" for it in index["items"] if it["track"] == TRACK_N)
        strict = sum(it["o"][i][0] == "S" for it in index["items"] if it["track"] == TRACK_P)
        assert right_n == metrics["RIMO-N.correct"][i], side
        assert strict / metrics["RIMO-P.n"][i] == pytest.approx(metrics["RIMO-P.strict"][i])
        head = index["runs"][i]["tracks"][TRACK_N]["metrics"][0]
        assert head["name"] == "accuracy" and head["value"] == metrics["RIMO-N.accuracy"][i]
        assert head["ci"] is not None
    for track in (TRACK_N, TRACK_P):
        want = [(f["problem_id"], f["a"], f["b"]) for f in result["tracks"][track]["flips"]]
        got = [(f["id"], f["a"], f["b"]) for f in index["pairs"]["0-1"][track]["flips"]]
        assert got == want and got
    # RIMO-N: A wrong on 0-11 (hostile), 20-39, 40 (missing); B on 30-49: 22 + 9 flips.
    assert len(index["pairs"]["0-1"][TRACK_N]["flips"]) == 12 + 10 + 9


@pytest.mark.slow
def test_a_run_not_in_the_cache_is_an_error_naming_files_and_pull(
        two_runs: dict[str, Any], tmp_path: Path) -> None:
    repo = two_runs["repo"]
    cache = repo / ".dvc/cache"
    moved = tmp_path / "cache"
    shutil.move(cache, moved)
    try:
        proc = sh(repo, "rimo-eval", "view", "run-a", "--out", "gone", check=False)
    finally:
        shutil.move(moved, cache)
    assert proc.returncode == 1
    assert "data/scores/rimo_n.parquet" in proc.stderr
    # No DVC remote in this repo: the advice is not a `dvc pull` that would fail.
    assert "no DVC remote is configured" in proc.stderr and "pull" not in proc.stderr
    assert not (repo / "gone").exists()
