"""The one Parquet writer of the pipeline: atomic, zstd, so every table is written alike."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from stages.core.atomic import write_with

COMPRESSION = "zstd"


def write_parquet(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Publish ``table`` at ``path`` atomically: the old file or the new one, never torn."""
    write_with(path, lambda tmp: pq.write_table(table, tmp, compression=COMPRESSION))
