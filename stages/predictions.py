"""The predictions tables: one row per evaluated item, saying what produced it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from stages import TRACK_N, TRACK_P
from stages.atomic import write_with
from stages.errors import StageError
from stages.hashing import canonical_json
from stages.items import Item
from stages.predictors.base import Prediction

PREDICTIONS_DIR = Path("data/predictions")
PREDICTION_FILES = {TRACK_N: "rimo_n.parquet", TRACK_P: "rimo_p.parquet"}

_COMMON = [
    ("track", pa.string()),
    ("problem_id", pa.string()),
    ("item_hash", pa.string()),  # content hash of the item the prediction answers
    ("status", pa.string()),  # ok | missing | error
    ("error", pa.string()),
    ("details", pa.string()),  # canonical JSON of backend-specific details
    ("backend", pa.string()),
    ("backend_params", pa.string()),  # canonical JSON of the backend's params
    ("fingerprint", pa.string()),  # sha256 of backend identity (params, templates, version)
]
PREDICTION_SCHEMAS = {
    TRACK_N: pa.schema([*_COMMON[:3], ("prediction", pa.string()), *_COMMON[3:]]),
    TRACK_P: pa.schema([*_COMMON[:3], ("prediction", pa.list_(pa.string())), *_COMMON[3:]]),
}


def predictions_path(track: str, out_dir: str | os.PathLike[str] = PREDICTIONS_DIR) -> Path:
    return Path(out_dir) / PREDICTION_FILES[track]


def build_table(track: str, items: Sequence[Item], preds: dict[tuple[str, str], Prediction],
                identity: dict[str, Any], fp: str) -> pa.Table:
    """Rows in item order (sorted by problem_id), so the file is byte-stable."""
    rows = []
    for item in sorted(items, key=lambda it: it.problem_id):
        pred = preds[item.key]
        rows.append({
            "track": track,
            "problem_id": item.problem_id,
            "item_hash": item.content_hash,
            "prediction": pred.prediction,
            "status": pred.status,
            "error": pred.error,
            "details": canonical_json(pred.details),
            "backend": identity["backend"],
            "backend_params": canonical_json(identity.get("params", {})),
            "fingerprint": fp,
        })
    schema = PREDICTION_SCHEMAS[track]
    return pa.Table.from_pylist(rows, schema=schema)


def write_table(table: pa.Table, path: str | os.PathLike[str]) -> None:
    write_with(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def read_predictions(track: str, out_dir: str | os.PathLike[str] = PREDICTIONS_DIR
                     ) -> pd.DataFrame:
    path = predictions_path(track, out_dir)
    if not path.exists():
        raise StageError(f"{path}: predictions not found (run the predict stage first)")
    return pd.read_parquet(path)

