"""The files of one run, read through DVC at its revision: git for tracked files, the DVC cache
for outputs, so nothing is checked out and the workspace is left alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import pandas as pd

from rimo_eval.artifacts.paths import PARAMS_PATH
from rimo_eval.errors import DataError
from rimo_eval.io.json_object import parse_object
from rimo_eval.run.revision import Revision

if TYPE_CHECKING:
    import pyarrow as pa

# A table as Arrow reads it: the path of a file on disk (Arrow opens and reads it in C++) or
# the bytes of a file git holds, in an Arrow buffer. Never a Python file object: Arrow's
# thread pool can drop the last reference to one after the interpreter began to finalize; that
# thread then cannot take the GIL and the process aborts after its work is done ("terminate
# called without an active exception", exit -6; apache/arrow#34314). Seen in 4 of 150
# `rimo-eval summary` runs under load, the backtrace in a ParquetFileFragment's PyReadableFile.
TableSource: TypeAlias = "str | pa.NativeFile"


class RunFiles:
    """One revision's files through ``fs`` (rimo_eval.run.tree: the workspace on disk, or a
    commit's git tree and dvc.lock outputs in the DVC cache), with the project's errors."""

    def __init__(self, revision: Revision, fs: Any) -> None:
        self.revision = revision
        self.where = revision.where
        self.fs = fs

    def exists(self, path: Path) -> bool:
        return bool(self.fs.exists(path.as_posix()))

    def read_bytes(self, path: Path) -> bytes:
        from dvc.exceptions import DvcException

        try:
            data: bytes = self.fs.read_bytes(path.as_posix())
            return data
        except (FileNotFoundError, DvcException) as exc:
            why = "not found" if isinstance(exc, FileNotFoundError) else str(exc)
            raise DataError(f"{path.as_posix()}: not readable at {self.where} ({why})") from exc

    def source(self, path: Path) -> TableSource:
        """The table at ``path`` for Arrow (TableSource): its file on disk where it has one
        (a table is then read in parts, never whole), else its bytes from git."""
        import pyarrow as pa

        try:
            local = self.fs.local(path.as_posix())
        except FileNotFoundError as exc:  # not at the revision, or not in the local cache
            raise DataError(f"{path.as_posix()}: not readable at {self.where} (not found)") \
                from exc
        return pa.BufferReader(self.read_bytes(path)) if local is None else local

    def read_json(self, path: Path, required: bool = True) -> dict[str, Any] | None:
        """A JSON object; None for an optional file the revision does not have."""
        if not required and not self.exists(path):
            return None  # e.g. a revision from before the breakdown and provenance files
        return parse_object(self.read_bytes(path), f"{path.as_posix()} at {self.where}")

    def read_parquet(self, path: Path, columns: list[str] | None = None) -> pd.DataFrame:
        """The table (only ``columns``), read from the file in place."""
        return pd.read_parquet(self.source(path), columns=columns)

    def read_params(self) -> dict[str, Any]:
        """params.yaml at the revision; {} where it has none (or holds no mapping). A key given
        twice or YAML that does not parse is a DataError naming the file and line."""
        import yaml

        from rimo_eval.params.yaml_file import DuplicateKeyError, load_unique

        if not self.exists(PARAMS_PATH):
            return {}
        where = f"params.yaml at {self.where}"
        try:  # a key given twice would silently be its last copy
            params = load_unique(self.read_bytes(PARAMS_PATH).decode("utf-8"), where) or {}
        except DuplicateKeyError as exc:
            raise DataError(str(exc)) from exc
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise DataError(f"{where}: not valid YAML: {exc}") from exc
        return params if isinstance(params, dict) else {}


__all__ = ["RunFiles"]
