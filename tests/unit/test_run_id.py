"""One predict run = one run id in both tables; score refuses a pair whose run ids differ."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from rimo_eval.artifacts.predictions import predictions_path, read_run_id
from rimo_eval.errors import IntegrityError
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.stage import score
from tests.support.factories import predict_section, section, small_benchmark

BOOT = section(ScoreParams, "score", bootstrap={"samples": 50, "seed": 0, "confidence": 0.95})
CONSTANT = {"backend": "constant", "constant": {"answer": "12"}}


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    small_benchmark(tmp_path / "items")
    return tmp_path


def run(bench: Path, out: str, **cfg: object) -> dict[str, object]:
    return predict(predict_section({**CONSTANT, **cfg}), bench / "items", bench / out)


def score_dir(bench: Path, preds: str) -> dict:
    return score(BOOT, bench / "items", bench / preds, bench / "scores", bench / "m.json",
                 bench / "plots")


def test_both_tables_carry_the_same_run_id(bench: Path) -> None:
    result = run(bench, "a", limit=2)
    for track in TRACKS:
        path = predictions_path(track, bench / "a")
        assert set(pd.read_parquet(path)["run_id"]) == {result["run_id"]}
        assert read_run_id(path) == result["run_id"]  # also in the file, for empty tables


def test_run_id_is_deterministic_so_reruns_stay_byte_identical(bench: Path) -> None:
    run(bench, "a", limit=2)
    run(bench, "b", limit=2)
    for track in TRACKS:
        a, b = (predictions_path(track, bench / d) for d in ("a", "b"))
        assert a.read_bytes() == b.read_bytes()


def test_a_change_of_limit_alone_changes_the_run_id_not_the_fingerprint(bench: Path) -> None:
    small, large = run(bench, "a", limit=2), run(bench, "b", limit=3)
    assert small["fingerprint"] == large["fingerprint"]
    assert small["run_id"] != large["run_id"]
    assert run(bench, "c", limit=2, sample_seed=5)["run_id"] != small["run_id"]


def test_score_refuses_a_mixed_pair_naming_both_files(bench: Path) -> None:
    """The pair a predict killed between its two renames leaves: RIMO-N of the new run (limit 3)
    beside RIMO-P of the old one (limit 2), same backend, same fingerprint."""
    old, new = run(bench, "old", limit=2), run(bench, "new", limit=3)
    shutil.copyfile(predictions_path(TRACK_N, bench / "new"),
                    predictions_path(TRACK_N, bench / "old"))
    with pytest.raises(IntegrityError, match="more than one predict run") as err:
        score_dir(bench, "old")
    message = str(err.value)
    assert str(predictions_path(TRACK_N, bench / "old")) in message
    assert str(predictions_path(TRACK_P, bench / "old")) in message
    assert new["run_id"] in message and old["run_id"] in message
    assert not (bench / "m.json").exists()
    score_dir(bench, "new")  # an unmixed pair scores
    assert (bench / "m.json").exists()


def test_an_empty_table_is_checked_by_its_file_run_id(bench: Path) -> None:
    run(bench, "zero", limit=0)
    run(bench, "two", limit=2)
    shutil.copyfile(predictions_path(TRACK_P, bench / "two"),
                    predictions_path(TRACK_P, bench / "zero"))
    with pytest.raises(IntegrityError, match="more than one predict run"):
        score_dir(bench, "zero")


def test_tables_without_run_ids_are_refused(bench: Path) -> None:
    run(bench, "a", limit=2)
    path = predictions_path(TRACK_P, bench / "a")
    pq.write_table(pq.read_table(path).drop_columns(["run_id"]), path)
    with pytest.raises(IntegrityError, match=r"rimo_p\.parquet: no run_id column"):
        score_dir(bench, "a")
