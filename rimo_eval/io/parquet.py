"""The one Parquet writer of the pipeline: atomic, zstd, so every table is written alike."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from rimo_eval.io.atomic import write_with

if TYPE_CHECKING:
    import pandas as pd

COMPRESSION = "zstd"


def write_parquet(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Publish ``table`` at ``path`` atomically: the old file or the new one, never torn."""
    write_with(path, lambda tmp: pq.write_table(table, tmp, compression=COMPRESSION))


def write_row_groups(groups: Iterable[pa.Table], schema: pa.Schema, path: Path) -> None:
    """Write ``groups`` to ``path`` (an unpublished temporary file), one row group each, so
    only one group is in memory at a time. With one group the bytes are those of
    ``write_parquet`` (``pq.write_table`` is this writer with one ``write_table``)."""
    with pq.ParquetWriter(path, schema, compression=COMPRESSION) as writer:
        for group in groups:
            writer.write_table(group)


def table_from_rows(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)``, without importing pandas.

    pyarrow's converter for Python lists imports pandas on its first call (to ask whether the
    list is a pandas object): 0.3 s of CPU, a twentieth of a fast predict run, which needs no
    pandas otherwise. Arrow's JSON reader builds the same columns in C++ from JSON lines typed
    by ``schema`` (a row with a key the schema lacks is an error, as it is for ``from_pylist``
    with a wrong type). One block, so the table is one chunk and writes byte-stably.
    """
    import pyarrow.json as pa_json

    if not rows:
        return schema.empty_table()
    data = "\n".join(json.dumps(row, allow_nan=False) for row in rows).encode("ascii")
    table = pa_json.read_json(
        pa.py_buffer(data),
        read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1),
        parse_options=pa_json.ParseOptions(explicit_schema=schema,
                                           unexpected_field_behavior="error"))
    return table.select(schema.names).replace_schema_metadata(schema.metadata)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """``frame.to_dict("records")``, typed as what it is here: our tables' columns are named by
    strings (pandas-stubs can only say Hashable)."""
    return cast(list[dict[str, Any]], frame.to_dict("records"))
