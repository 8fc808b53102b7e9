"""The predictions tables: one row per evaluated item and sample, saying what produced it."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from stages.core.artifacts import PREDICTION_FILES, PREDICTIONS_DIR, predictions_path  # noqa: F401
from stages.core.errors import DataError
from stages.core.hashing import canonical_json, fingerprint
from stages.core.items import Item
from stages.core.tables import table_from_rows, write_parquet, write_row_groups
from stages.core.tracks import TRACK_N, TRACK_P

if TYPE_CHECKING:
    import pandas as pd

STATUS_OK = "ok"
STATUS_MISSING = "missing"  # the backend has no prediction for the item (counted wrong)
STATUS_ERROR = "error"  # the backend failed on the item (counted wrong, reason kept)
STATUSES = (STATUS_OK, STATUS_MISSING, STATUS_ERROR)


@dataclass
class Prediction:
    """A prediction: a string for RIMO-N, an ordered list of strings for RIMO-P."""

    track: str
    problem_id: str
    prediction: str | list[str] | None
    status: str = STATUS_OK
    error: str | None = None
    # Backend-specific record of how the prediction came about (raw text, usage, latency...).
    details: dict[str, Any] = field(default_factory=dict)
    sample: int = 0  # 0-based index of this sample among the item's predict.samples

    @property
    def key(self) -> tuple[str, str]:
        return (self.track, self.problem_id)

    @property
    def sample_key(self) -> tuple[str, str, int]:
        return (self.track, self.problem_id, self.sample)


_COMMON = [
    ("track", pa.string()),
    ("problem_id", pa.string()),
    ("sample", pa.int32()),  # 0-based sample index; one row per (item, sample)
    ("item_hash", pa.string()),  # content hash of the item the prediction answers
    ("status", pa.string()),  # ok | missing | error
    ("error", pa.string()),
    ("details", pa.string()),  # canonical JSON of backend-specific details
    ("backend", pa.string()),
    ("backend_params", pa.string()),  # canonical JSON of the backend's params
    ("fingerprint", pa.string()),  # sha256 of backend identity (params, templates, version)
    ("run_id", pa.string()),  # sha256 of the fingerprint and the whole sample: see run_id()
]
# The run id is also in each file's schema metadata, so an empty table (limit 0) carries one.
RUN_ID_META = b"rimo_eval.run_id"
PREDICTION_SCHEMAS = {
    TRACK_N: pa.schema([*_COMMON[:4], ("prediction", pa.string()), *_COMMON[4:]]),
    TRACK_P: pa.schema([*_COMMON[:4], ("prediction", pa.list_(pa.string())), *_COMMON[4:]]),
}


def lone_surrogate(value: str | list[str] | None) -> tuple[str, int] | None:
    """The first unpaired UTF-16 surrogate of a prediction (a string or a list of them) and its
    index, which no UTF-8 file can hold; None when every text encodes."""
    for text in [value] if isinstance(value, str) else value or []:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return text[exc.start], exc.start
    return None


def run_id(fp: str, sample: dict[str, Sequence[Item]], samples: int = 1) -> str:
    """One predict run: the backend fingerprint, k and every requested item of both tracks.

    The fingerprint alone does not change with ``limit``, ``sample_seed`` or
    ``predict.samples``, so two runs that differ only there would pass for one. Deterministic,
    so a rerun stays byte-identical.
    """
    chosen = {t: sorted([it.problem_id, it.content_hash] for it in its)
              for t, its in sorted(sample.items())}
    return fingerprint({"fingerprint": fp, "sample": chosen, "samples": samples})


# Rows per Parquet row group: the table is built and written this many rows at a time, so a
# k = 64 run never holds a whole table (its rows, their JSON and the Arrow copy) at once. A
# k = 1 table (at most 456 rows) is one group, as before.
ROW_GROUP_ROWS = 1024


def table_schema(track: str, run: str) -> pa.Schema:
    return PREDICTION_SCHEMAS[track].with_metadata({RUN_ID_META: run.encode()})


def table_groups(track: str, items: Sequence[Item],
                 preds: dict[tuple[str, str, int], Prediction], identity: dict[str, Any],
                 fp: str, samples: int = 1, run: str | None = None,
                 rows_per_group: int | None = None) -> Iterator[pa.Table]:
    """The table in row groups of ``rows_per_group`` rows, sorted by (problem_id, sample), so
    the file is byte-stable. ``run`` defaults to a run id of this table's items alone
    (one-track callers). An empty table is one empty group."""
    run = run or run_id(fp, {track: items}, samples)
    rows_per_group = rows_per_group or ROW_GROUP_ROWS
    schema = table_schema(track, run)
    backend, params = identity["backend"], canonical_json(identity.get("params", {}))
    rows: list[dict[str, Any]] = []
    emitted = False
    for item in sorted(items, key=lambda it: it.problem_id):
        for j in range(samples):
            pred = preds[(*item.key, j)]
            rows.append({
                "track": track,
                "problem_id": item.problem_id,
                "sample": j,
                "item_hash": item.content_hash,
                "prediction": pred.prediction,
                "status": pred.status,
                "error": pred.error,
                "details": canonical_json(pred.details),
                "backend": backend,
                "backend_params": params,
                "fingerprint": fp,
                "run_id": run,
            })
            if len(rows) == rows_per_group:
                yield table_from_rows(rows, schema)
                rows, emitted = [], True
    if rows or not emitted:
        yield table_from_rows(rows, schema)


def build_table(track: str, items: Sequence[Item],
                preds: dict[tuple[str, str, int], Prediction], identity: dict[str, Any], fp: str,
                samples: int = 1, run: str | None = None) -> pa.Table:
    """The whole table in memory (``table_groups`` joined)."""
    return pa.concat_tables(list(table_groups(track, items, preds, identity, fp, samples, run)))


def write_table(table: pa.Table, path: str | os.PathLike[str]) -> None:
    write_parquet(table, path)


def write_groups(groups: Iterator[pa.Table], schema: pa.Schema, tmp: Path) -> None:
    """``table_groups`` into an unpublished temporary file (see ``stages.core.atomic``)."""
    write_row_groups(groups, schema, tmp)


def read_run_id(path: str | os.PathLike[str]) -> str | None:
    """The run id a predictions file was written with (None: written before run ids)."""
    meta = pq.read_schema(path).metadata or {}
    value = meta.get(RUN_ID_META)
    return value.decode() if value else None


def read_predictions(track: str, out_dir: str | os.PathLike[str] = PREDICTIONS_DIR
                     ) -> pd.DataFrame:
    import pandas as pd  # lazily: predict writes tables with pyarrow and needs no pandas

    path = predictions_path(track, out_dir)
    if not path.exists():
        raise DataError(f"{path}: predictions not found (run the predict stage first)")
    return pd.read_parquet(path)

