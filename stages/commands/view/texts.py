"""A predictions table's long texts (reasoning, raw text), read forward one item at a time.

The site is built item by item in the tables' own order (by problem id, then sample), so the
texts of a k = 64 reasoning run (3.4 GB) are never all in memory: only the record batch being
read and the current item's samples are (issue 20).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq

from stages.core.predictions import RAW_TEXT, REASONING

BATCH_ROWS = 64  # rows read at once: 64 RIMO-P rows of reasoning replies are about 12 MB
NO_TEXTS: tuple[Any, Any] = (None, None)


def _plain(value: Any) -> Any:
    """A cell as ``split_texts`` returns it: a string, a list (RIMO-P) or None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        return [v if isinstance(v, str) else None for v in value]
    return None


class TextCursor:
    """``get(problem_id, sample)`` -> ``(reasoning, raw_text)``, for problem ids asked in
    ascending order (asking for an earlier one reads the file again from its start)."""

    def __init__(self, file: pq.ParquetFile) -> None:
        self._file = file
        self._start()

    def _start(self) -> None:
        columns = ["problem_id", "sample", REASONING, RAW_TEXT]
        self._batches: Iterator[Any] = self._file.iter_batches(batch_size=BATCH_ROWS,
                                                               columns=columns)
        self._ahead: deque[dict[str, Any]] = deque()
        self._pid: str | None = None
        self._current: dict[int, tuple[Any, Any]] = {}

    def close(self) -> None:
        self._file.close(force=True)  # and the file it reads

    def get(self, pid: str, sample: int) -> tuple[Any, Any]:
        if pid != self._pid:
            if self._pid is not None and pid < self._pid:
                self._start()
            self._advance(pid)
        return self._current.get(sample, NO_TEXTS)

    def _advance(self, pid: str) -> None:
        self._pid, self._current = pid, {}
        while True:
            if not self._ahead:
                batch = next(self._batches, None)
                if batch is None:
                    return
                self._ahead.extend(batch.to_pylist())
                continue
            row = self._ahead[0]
            if str(row["problem_id"]) > pid:
                return
            self._ahead.popleft()
            if str(row["problem_id"]) == pid:
                self._current[int(row["sample"])] = (_plain(row[REASONING]),
                                                     _plain(row[RAW_TEXT]))


__all__ = ["TextCursor"]
