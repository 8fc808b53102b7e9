"""``view`` reads the long texts an item at a time, forward through the predictions table's
row groups, and gets each sample's own texts back (issue 20)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rimo_eval.artifacts import predictions
from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.commands.view import texts
from rimo_eval.commands.view.texts import DetailsCursor
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import n_item, p_item, predict_section, write_items
from tests.support.view_runs import write_jsonl


@pytest.fixture
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_items(tmp_path / "items", [n_item(f"n{i:02d}", str(i)) for i in range(9)],
                [p_item(f"p{i:02d}", ["a", "b"]) for i in range(3)])
    rows = [{"track": TRACK_N, "problem_id": f"n{i:02d}", "sample": j, "prediction": str(i)}
            for i in range(9) for j in range(3)]
    rows += [{"track": TRACK_P, "problem_id": f"p{i:02d}", "sample": j, "prediction": ["a", "b"]}
             for i in range(3) for j in range(3)]
    write_jsonl(tmp_path / "replay.jsonl", rows)
    monkeypatch.setattr(predictions, "ROW_GROUP_ROWS", 4)  # items straddle row groups
    predict(predict_section(backend="replay", replay={"path": str(tmp_path / "replay.jsonl")},
                            samples=3, limit=None), tmp_path / "items", tmp_path / "preds")
    # Give every row texts of its own, as a reasoning model's run has.
    for track in (TRACK_N, TRACK_P):
        path = predictions_path(track, tmp_path / "preds")
        table = pq.read_table(path)
        out = table.to_pylist()
        for row in out:
            tag = f"{row['problem_id']}/{row['sample']}"
            row["details"] = json.dumps({"tag": tag})
            if track == TRACK_N:
                row["reasoning"], row["raw_text"] = f"think {tag}", f"raw {tag}"
            else:
                row["details"] = json.dumps({"parts": [{"text": "a"}, {"text": "b"}]})
                row["reasoning"], row["raw_text"] = [f"think {tag} a", None], [None, None]
        pq.write_table(table.from_pylist(out, schema=table.schema), path, row_group_size=4)
    return tmp_path / "preds"


def test_each_sample_gets_its_own_texts_read_forward(
        tables: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(texts, "BATCH_ROWS", 5)  # batches cut across items too
    path = predictions_path(TRACK_N, tables)
    assert pq.ParquetFile(path).metadata.num_row_groups == 7
    cursor = DetailsCursor(path, TRACK_N)

    def pair(d: dict) -> tuple:
        return d.get("reasoning"), d.get("raw_text")

    for i in range(9):
        for j in (2, 0, 1):  # samples in any order within an item
            d = cursor.get(f"n{i:02d}", j)
            assert pair(d) == (f"think n{i:02d}/{j}", f"raw n{i:02d}/{j}")
            assert d["tag"] == f"n{i:02d}/{j}"  # the light details, read with them
    assert pair(cursor.get("n04", 1)) == ("think n04/1", "raw n04/1")  # back: read again
    assert cursor.get("n04x", 0) == {}  # an item the run lacks has none
    assert cursor.get("n05", 3) == {}  # so does a sample it lacks
    cursor.close()
    p = DetailsCursor(predictions_path(TRACK_P, tables), TRACK_P)
    parts = p.get("p01", 2)["parts"]
    assert [q.get("reasoning") for q in parts] == ["think p01/2 a", None]


def test_the_cursor_drops_each_row_group_once_read(tmp_path: Path) -> None:
    """Reading forward holds one row group's Arrow buffers, not every group read so far:
    ParquetFile.iter_batches kept them all (300 MiB over a k = 16 reasoning run's RIMO-P
    table, benchmarks/README.md)."""
    import pyarrow as pa

    text = "x" * 200_000
    rows = [{"problem_id": f"p{i:03d}", "sample": 0, "details": "{}",
             predictions.REASONING: text, predictions.RAW_TEXT: None} for i in range(40)]
    path = tmp_path / "t.parquet"
    with pq.ParquetWriter(path, pa.Table.from_pylist(rows[:1]).schema) as writer:
        for row in rows:  # a row group each: 40 x 200 KB
            writer.write_table(pa.Table.from_pylist([row]))
    cursor = DetailsCursor(path, TRACK_N)
    base, peak = pa.total_allocated_bytes(), 0
    for row in rows:
        assert cursor.get(row["problem_id"], 0)["reasoning"] == text
        peak = max(peak, pa.total_allocated_bytes() - base)
    cursor.close()
    assert peak < 2_000_000, peak  # a few groups at most, not 8 MB
