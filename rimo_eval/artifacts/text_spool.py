"""Where a run's long reply texts wait on disk until their predictions table is written.

A k = 64 run of a reasoning model makes 101,056 replies of some 34 KB each: held as Python
strings until the end, the texts alone are 3.4 GB (issue 20). The engine finishes samples in
any order but the tables are written sorted, so each finished prediction is *parked*: its
reasoning and raw text (``predictions.split_texts``) go to an unnamed temporary file and the
prediction keeps its light details and where to read them back. The file has no name (it is
unlinked at once), so a crash or kill -9 leaves nothing behind; the replies themselves are in
the response cache, which is what a rerun resumes from. Written once, read once, in one
thread: a plain append-only file, no index on disk.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from rimo_eval.artifacts.predictions import InlineTexts, Prediction, split_texts


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(v is None for v in value))


class Parked:
    """A prediction's texts in the spool: ``read`` returns ``(reasoning, raw_text)``."""

    __slots__ = ("_offset", "_size", "_spool")

    def __init__(self, spool: TextSpool, offset: int, size: int) -> None:
        self._spool, self._offset, self._size = spool, offset, size

    def read(self) -> tuple[Any, Any]:
        reasoning, raw = json.loads(self._spool.read(self._offset, self._size))
        return reasoning, raw


class TextSpool:
    """An append-only temporary file in ``directory`` (the outputs' disk), closed on exit."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        # Closed by close() / __exit__: the spool lives for the whole predict stage.
        self._file = tempfile.TemporaryFile(dir=directory, prefix=".texts-")  # noqa: SIM115
        self._end = 0
        self._dirty = False
        self.parked = 0  # predictions whose texts went to the file

    def park(self, pred: Prediction) -> None:
        """Move ``pred``'s long texts out of its details (a second call does nothing)."""
        if pred.texts is not None:
            return
        details, reasoning, raw = split_texts(pred.track, pred.details)
        pred.details = details
        if _empty(reasoning) and _empty(raw):
            pred.texts = InlineTexts(reasoning, raw)
            return
        # surrogatepass: a lone surrogate in a reasoning text reaches the table as before.
        blob = json.dumps([reasoning, raw], ensure_ascii=False).encode("utf-8", "surrogatepass")
        self._file.write(blob)
        pred.texts = Parked(self, self._end, len(blob))
        self._end += len(blob)
        self._dirty = True
        self.parked += 1

    def read(self, offset: int, size: int) -> str:
        if self._dirty:
            self._file.flush()
            self._dirty = False
        return os.pread(self._file.fileno(), size, offset).decode("utf-8", "surrogatepass")

    @property
    def bytes(self) -> int:
        return self._end

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TextSpool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
