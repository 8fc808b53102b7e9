"""rimo-eval summary's hints when a run's outputs are gone: `dvc checkout` / `dvc exp apply`
after a failed `dvc exp run`, `dvc pull` only where a DVC remote is configured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rimo_eval.commands.summary import EXP_SHOW_VIEW, has_remote, summary
from rimo_eval.errors import DataError
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P


def metrics_only(root: Path) -> Path:
    (root / "reports").mkdir(parents=True)
    metrics = {TRACK_N: {"accuracy": 0.0, "accuracy_ci_low": 0.0, "accuracy_ci_high": 0.434482,
                         "n": 5, "correct": 0, "missing": 0, "errors": 0},
               TRACK_P: {"prefix_score": 0.0, "n": 5},
               "sample": {"is_sample": True, "evaluated": {TRACK_N: 5, TRACK_P: 5},
                          "total": {TRACK_N: 335, TRACK_P: 456}, "limit": 5, "seed": 0}}
    (root / "reports/metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    (root / ".dvc").mkdir()
    (root / ".dvc/config").write_text("[core]\n    autostage = true\n", encoding="utf-8")
    return root


def test_no_remote_no_pull(tmp_path: Path) -> None:
    root = metrics_only(tmp_path)
    assert not has_remote(root)
    text = summary(root)
    assert ("a failed `dvc exp run` removed them: `dvc checkout` (last commit) or "
            "`dvc exp apply NAME` restores them") in text
    assert "dvc pull" not in text
    assert "RIMO-N accuracy                0.0%  95% [0.0%, 43.4%]" in text  # Wilson 0/5
    assert text.rstrip("\n").endswith(EXP_SHOW_VIEW)
    assert all(len(line) <= 120 for line in text.splitlines())


def test_a_configured_remote_adds_pull(tmp_path: Path) -> None:
    root = metrics_only(tmp_path)
    (root / ".dvc/config.local").write_text("['remote \"team\"']\n    url = s3://b/rimo\n",
                                            encoding="utf-8")
    assert has_remote(root)
    assert "; `dvc pull` (remote)" in summary(root)


def test_missing_metrics_names_the_file_and_the_way_back(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"reports/metrics.json: not found: run `dvc repro`, "
                                        r"or if a failed `dvc exp run` removed it: "
                                        r"`dvc checkout` \(last commit\)"):
        summary(tmp_path)


def test_older_runs_with_plain_ci_keys_still_show_their_interval(tmp_path: Path) -> None:
    root = metrics_only(tmp_path)
    path = root / "reports/metrics.json"
    old = json.loads(path.read_text(encoding="utf-8"))
    n = old[TRACK_N]
    n["ci_low"], n["ci_high"] = n.pop("accuracy_ci_low"), n.pop("accuracy_ci_high")
    path.write_text(json.dumps(old), encoding="utf-8")
    assert "95% [0.0%, 43.4%]" in summary(root)
