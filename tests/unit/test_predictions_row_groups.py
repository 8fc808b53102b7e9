"""The predictions tables are built and written a row group at a time: the same rows in the
same order, deterministic bytes, and with one group the very bytes of a whole-table write."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rimo_eval.artifacts import predictions
from rimo_eval.artifacts.items import load_items
from rimo_eval.artifacts.predictions import build_table, predictions_path, write_table
from rimo_eval.io.hashing import fingerprint
from rimo_eval.predict import predict
from rimo_eval.predictors import create_predictor
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from tests.support.factories import n_item, p_item, predict_section, write_items


def run(tmp_path: Path, name: str, samples: int) -> dict[str, bytes]:
    predict(predict_section(backend="oracle", limit=None, samples=samples), tmp_path / "items",
            tmp_path / name)
    return {t: predictions_path(t, tmp_path / name).read_bytes() for t in TRACKS}


@pytest.fixture
def items(tmp_path: Path) -> Path:
    write_items(tmp_path / "items", [n_item(f"n{i:02d}", str(i)) for i in range(10)],
                [p_item(f"p{i:02d}", ["a", "b"]) for i in range(4)])
    return tmp_path / "items"


def test_row_groups_keep_order_and_bytes_are_deterministic(
        tmp_path: Path, items: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = run(tmp_path, "whole", 3)  # 30 and 12 rows: one group each
    monkeypatch.setattr(predictions, "ROW_GROUP_ROWS", 7)
    first, second = run(tmp_path, "a", 3), run(tmp_path, "b", 3)
    assert first == second  # byte-identical reruns
    for track, rows in ((TRACK_N, 30), (TRACK_P, 12)):
        path = predictions_path(track, tmp_path / "a")
        meta = pq.ParquetFile(path).metadata
        assert meta.num_row_groups == -(-rows // 7)
        assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [
            7] * (rows // 7) + ([rows % 7] if rows % 7 else [])
        # The same table as the whole-table write, row for row, with its run id.
        assert pq.read_table(path).equals(pq.read_table(predictions_path(track,
                                                                         tmp_path / "whole")))
        assert pq.read_schema(path).metadata == pq.read_schema(
            predictions_path(track, tmp_path / "whole")).metadata
    assert first != whole  # more row groups: other bytes, the same rows


def test_one_group_is_the_bytes_of_a_whole_table_write(tmp_path: Path, items: Path) -> None:
    streamed = run(tmp_path, "s", 1)
    predictor = create_predictor("oracle")
    loaded = {t: load_items(t, items) for t in TRACKS}
    preds = {p.sample_key: p for p in predictor.predict([*loaded[TRACK_N], *loaded[TRACK_P]])}
    identity = predictor.identity()
    fp = fingerprint(identity)
    run_id = predictions.run_id(fp, {t: loaded[t] for t in TRACKS}, 1)
    for track in TRACKS:
        write_table(build_table(track, loaded[track], preds, identity, fp, 1, run_id),
                    tmp_path / f"{track}.parquet")
        assert (tmp_path / f"{track}.parquet").read_bytes() == streamed[track]


def test_long_texts_end_a_group_early(tmp_path: Path, items: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = load_items(TRACK_N, items)
    preds = {(*it.key, j): predictions.Prediction(
        TRACK_N, it.problem_id, "1", sample=j,
        details={"text": "1", "raw_text": "1", "reasoning": "r" * (100 + j)})
        for it in loaded for j in range(2)}
    monkeypatch.setattr(predictions, "ROW_GROUP_TEXT_CHARS", 250)
    groups = list(predictions.table_groups(TRACK_N, loaded, preds, {"backend": "t"}, "f", 2))
    # 100 + 101 + 100 chars reach 250 at the third row: groups of 3, the last of the 20 rows 2.
    assert [g.num_rows for g in groups] == [3] * 6 + [2]
    again = list(predictions.table_groups(TRACK_N, loaded, preds, {"backend": "t"}, "f", 2))
    assert all(a.equals(b) for a, b in zip(groups, again, strict=True))
    assert groups[0].column("reasoning").to_pylist() == ["r" * 100, "r" * 101, "r" * 100]
