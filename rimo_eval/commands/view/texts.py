"""A predictions table's per-sample details, long texts included, read forward an item at a
time.

The site is built item by item in the tables' own order (by problem id, then sample), so the
details and texts of a k = 64 reasoning run (3.4 GB of text) are never all in memory: only the
record batch being read and the current item's samples are (issue 20). Worker processes
(workers.py) each read their own blocks of items through a cursor of their own
(``reopened``), skipping the row groups before them by the file's problem-id statistics.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from rimo_eval.artifacts.predictions import (
    RAW_TEXT,
    REASONING,
    TEXT_COLUMNS,
    join_texts,
    parse_details,
)

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_ROWS = 64  # rows read at once: 64 RIMO-P rows of reasoning replies are about 12 MB


def plain_texts(value: Any) -> Any:
    """A text cell as ``split_texts`` returns it: a string, a list (RIMO-P) or None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        return [v if isinstance(v, str) else None for v in value]
    return None


class DetailsCursor:
    """``get(problem_id, sample)`` -> that sample's details with its reasoning and raw text
    joined back in, for problem ids asked in ascending order (asking for an earlier one reads
    the file again from its start). Tables from before the texts had columns of their own keep
    them in ``details``, which then passes through as stored. ``source``: the table's path, or
    an Arrow file (a table git holds; never a Python file: rimo_eval.run.files.TableSource)."""

    def __init__(self, source: str | os.PathLike[str] | pa.NativeFile, track: str) -> None:
        self._source, self._track = source, track
        self._file = pq.ParquetFile(source)
        self.names: list[str] = self._file.schema_arrow.names
        self._texts = set(TEXT_COLUMNS) <= set(self.names)
        self._columns = ["problem_id", "sample", "details",
                         *(TEXT_COLUMNS if self._texts else ())]
        self._first, self._last = _bounds(self._file)
        self._start()

    def path(self) -> str | None:
        """The table's path, None for a table held in memory."""
        source = self._source
        return os.fspath(source) if isinstance(source, str | os.PathLike) else None

    def reopened(self) -> DetailsCursor:
        """A cursor of the same table on a handle of its own (a forked worker's: a shared file
        offset would interleave two readers). Only for a cursor with a ``path``."""
        path = self.path()
        if path is None:
            raise ValueError("this cursor's table has no path to reopen")
        return DetailsCursor(path, self._track)

    def _start(self) -> None:
        self._group = 0  # the next row group to read
        self._batches: Iterator[Any] = iter(())  # the rest of the group being read
        self._ahead: deque[dict[str, Any]] = deque()
        self._pid: str | None = None
        self._current: dict[int, dict[str, Any]] = {}

    def _more(self) -> bool:
        """The next rows that may hold ``self._pid`` into ``_ahead``; False when none can.

        A row group at a time, each dropped when read: ParquetFile.iter_batches kept every
        group it had decoded (pyarrow 26: Arrow memory grew by the text read, 300 MiB over a
        k = 16 reasoning run's RIMO-P table; benchmarks/README.md, view_build.py). The
        problem-id statistics skip the groups wholly before the item (a worker's first item)
        and spare reading the group after it: an item that ends where its group does is
        known complete without decoding the next one (13 MB of text at k = 64), which the
        next block's worker reads anyway."""
        batch = next(self._batches, None)
        while batch is None:
            group, pid = self._group, self._pid
            if group >= len(self._last) or pid is None:
                return False
            last, first = self._last[group], self._first[group]
            if last is not None and last < pid:
                self._group += 1  # every row before the item asked for
                continue
            if first is not None and first > pid:
                return False  # every row after it: the item was complete
            table = self._file.read_row_group(group, columns=self._columns)
            self._group += 1
            self._batches = iter(table.to_batches(BATCH_ROWS))
            del table
            batch = next(self._batches, None)
        self._ahead.extend(batch.to_pylist())
        return True

    def close(self) -> None:
        self._file.close(force=True)  # and the file it reads

    def get(self, pid: str, sample: int) -> dict[str, Any]:
        if pid != self._pid:
            if self._pid is not None and pid < self._pid:
                self._start()
            self._advance(pid)
        return self._current.get(sample, {})

    def _advance(self, pid: str) -> None:
        self._pid, self._current = pid, {}
        while True:
            if not self._ahead:
                if not self._more():
                    return
                continue
            row = self._ahead[0]
            if str(row["problem_id"]) > pid:
                return
            self._ahead.popleft()
            if str(row["problem_id"]) == pid:
                details = parse_details(row["details"])
                if self._texts:
                    details = join_texts(self._track, details, plain_texts(row[REASONING]),
                                         plain_texts(row[RAW_TEXT]))
                self._current[int(row["sample"])] = details


def _bounds(file: pq.ParquetFile) -> tuple[list[str | None], list[str | None]]:
    """Each row group's smallest and largest problem id, from the file's statistics (None:
    unknown)."""
    meta = file.metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    if "problem_id" not in names:
        return [None] * meta.num_row_groups, [None] * meta.num_row_groups
    col = names.index("problem_id")
    first: list[str | None] = []
    last: list[str | None] = []
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(col).statistics
        known = stats is not None and stats.has_min_max
        first.append(stats.min if known and isinstance(stats.min, str) else None)
        last.append(stats.max if known and isinstance(stats.max, str) else None)
    return first, last


__all__ = ["DetailsCursor"]
