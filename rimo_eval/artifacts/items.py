"""The validated item tables: their paths, columns and loaders (the contract between stages)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

# Re-exported: the stages and tests take the items' paths from here.
from rimo_eval.artifacts.paths import ITEM_FILES as ITEM_FILES
from rimo_eval.artifacts.paths import ITEMS_DIR as ITEMS_DIR
from rimo_eval.artifacts.paths import items_path as items_path
from rimo_eval.errors import StageError
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

if TYPE_CHECKING:
    import pandas as pd

DOMAINS = ("algebra", "combinatorics", "geometry", "number theory")

_COMMON = [
    ("track", pa.string()),
    ("problem_id", pa.string()),
    ("problem", pa.string()),
    ("domain", pa.string()),
    ("number_of_parts", pa.int64()),
    ("gradable", pa.bool_()),
    ("ungradable_reason", pa.string()),
    ("content_hash", pa.string()),
]
ITEM_SCHEMAS = {
    TRACK_N: pa.schema([*_COMMON, ("solution", pa.string()), ("answer", pa.string())]),
    TRACK_P: pa.schema([
        *_COMMON,
        ("sub_problems", pa.list_(pa.string())),
        ("sub_solutions", pa.list_(pa.string())),
    ]),
}


@dataclass(frozen=True)
class Item:
    """One benchmark item as predictors see it."""

    track: str
    problem_id: str
    problem: str
    domain: str | None
    number_of_parts: int
    gradable: bool
    content_hash: str
    answer: str | None = None  # RIMO-N gold
    sub_problems: tuple[str, ...] = ()  # RIMO-P, in order
    sub_solutions: tuple[str, ...] = ()  # RIMO-P reference sub-solutions, in order

    @property
    def key(self) -> tuple[str, str]:
        return (self.track, self.problem_id)


def _existing(track: str, items_dir: str | os.PathLike[str]) -> os.PathLike[str]:
    path = items_path(track, items_dir)
    if not path.exists():
        raise StageError(f"{path}: items table not found (run the validate stage first)")
    return path


def read_items_frame(track: str, items_dir: str | os.PathLike[str] = ITEMS_DIR) -> pd.DataFrame:
    import pandas as pd

    return pd.read_parquet(_existing(track, items_dir))


def rows_to_items(rows: Iterable[dict[str, Any]]) -> list[Item]:
    """Items table rows (``to_pylist``) as predict reads them; also the partial view's."""
    items = []
    for row in rows:
        track = row["track"]
        items.append(Item(
            track=track,
            problem_id=row["problem_id"],
            problem=row["problem"],
            domain=row["domain"],
            number_of_parts=int(row["number_of_parts"]),
            gradable=bool(row["gradable"]),
            content_hash=row["content_hash"],
            answer=row.get("answer") if track == TRACK_N else None,
            sub_problems=tuple(row["sub_problems"]) if track == TRACK_P else (),
            sub_solutions=tuple(row["sub_solutions"]) if track == TRACK_P else (),
        ))
    return items


def load_items(track: str, items_dir: str | os.PathLike[str] = ITEMS_DIR) -> list[Item]:
    # pyarrow alone (ParquetFile: read_table imports pyarrow.dataset, which imports pandas):
    # predict needs no pandas, whose import was a fifth of a fast run.
    import pyarrow.parquet as pq

    return rows_to_items(pq.ParquetFile(_existing(track, items_dir)).read().to_pylist())
