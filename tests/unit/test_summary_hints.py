"""rimo-eval summary in the states a newcomer meets (issue 43 §3): a fresh clone, where nothing
has run, says so instead of printing the committed headline; a run whose tables are gone says
what brings them back in THIS repo (`dvc checkout`, `dvc exp apply`, `dvc pull` only where a
DVC remote is configured). A real git + DVC repo each time (`dvc add`), no pipeline run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rimo_eval.artifacts.paths import predictions_path, scores_path
from rimo_eval.commands.summary import EXP_SHOW_VIEW, summary
from rimo_eval.errors import DataError
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.run.recovery import has_remote
from tests.support.pipeline_repo import sh

TABLES = [p(t) for t in TRACKS for p in (predictions_path, scores_path)]


def committed_run(root: Path) -> Path:
    """A repo as a clone of a run gets it: metrics.json in git, the tables added to DVC."""
    root.mkdir(exist_ok=True)
    sh(root, "git", "init", "-q", "-b", "main")
    sh(root, "dvc", "init", "-q")
    (root / "reports").mkdir(parents=True)
    metrics = {TRACK_N: {"accuracy": 0.0, "accuracy_ci_low": 0.0, "accuracy_ci_high": 0.434482,
                         "n": 5, "correct": 0, "missing": 0, "errors": 0},
               TRACK_P: {"prefix_score": 0.0, "n": 5},
               "sample": {"is_sample": True, "evaluated": {TRACK_N: 5, TRACK_P: 5},
                          "total": {TRACK_N: 335, TRACK_P: 456}, "limit": 5, "seed": 0}}
    (root / "reports/metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    for path in TABLES:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"not read: the summary only asks whether it is here\n")
    sh(root, "dvc", "add", "-q", *map(str, TABLES))
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-qm", "a run")
    return root


def tables_gone(root: Path, cache_too: bool) -> None:
    for path in TABLES:
        (root / path).unlink()
    if cache_too:  # a fresh clone: no DVC cache at all
        shutil.rmtree(root / ".dvc/cache")


def test_a_fresh_clone_says_nothing_has_run_yet(tmp_path: Path) -> None:
    root = committed_run(tmp_path / "repo")
    tables_gone(root, cache_too=True)
    text = summary(root)
    assert text.startswith("nothing has run in this clone yet: reports/metrics.json is the "
                           "committed copy of a run made elsewhere")
    assert "`make repro` (or `dvc repro`) runs the pipeline here" in text
    assert "0.0%" not in text and "dvc pull" not in text and "failed" not in text


def test_tables_in_the_cache_but_not_the_workspace_name_dvc_checkout(tmp_path: Path) -> None:
    # What a failed `dvc exp run` leaves: the outputs of the stage that failed are removed.
    root = committed_run(tmp_path / "repo")
    tables_gone(root, cache_too=False)
    text = summary(root)
    assert ("its tables are not in the workspace: `dvc checkout` restores them from this "
            "clone's DVC cache") in text
    assert "dvc pull" not in text
    assert "RIMO-N accuracy                0.0%  95% [0.0%, 43.4%]" in text  # Wilson 0/5
    assert text.rstrip("\n").endswith(EXP_SHOW_VIEW)
    assert all(len(line) <= 120 for line in text.splitlines())


def test_a_configured_remote_makes_it_dvc_pull(tmp_path: Path) -> None:
    root = committed_run(tmp_path / "repo")
    tables_gone(root, cache_too=True)
    assert not has_remote(root)
    (root / ".dvc/config.local").write_text("['remote \"team\"']\n    url = s3://b/rimo\n",
                                            encoding="utf-8")
    assert has_remote(root)
    text = summary(root)
    assert "its tables are not in the workspace: `dvc pull` brings them from the DVC remote" \
        in text


def test_missing_metrics_names_the_file_and_the_way_to_run(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"reports/metrics.json: not found: `make repro` "
                                        r"\(or `dvc repro`\) runs the pipeline here"):
        summary(tmp_path)


def test_older_runs_with_plain_ci_keys_still_show_their_interval(tmp_path: Path) -> None:
    root = committed_run(tmp_path / "repo")
    path = root / "reports/metrics.json"
    old = json.loads(path.read_text(encoding="utf-8"))
    n = old[TRACK_N]
    n["ci_low"], n["ci_high"] = n.pop("accuracy_ci_low"), n.pop("accuracy_ci_high")
    path.write_text(json.dumps(old), encoding="utf-8")
    assert "95% [0.0%, 43.4%]" in summary(root)
