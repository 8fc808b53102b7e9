"""The predictions tables: one row per evaluated item and sample, saying what produced it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from rimo_eval.artifacts.items import Item

# Re-exported: the stages and tests take the predictions' paths from here.
from rimo_eval.artifacts.paths import PREDICTION_FILES as PREDICTION_FILES
from rimo_eval.artifacts.paths import PREDICTIONS_DIR as PREDICTIONS_DIR
from rimo_eval.artifacts.paths import predictions_path as predictions_path
from rimo_eval.errors import DataError
from rimo_eval.io.hashing import canonical_json, fingerprint
from rimo_eval.io.parquet import table_from_rows, write_parquet, write_row_groups
from rimo_eval.io.surrogates import first_lone_surrogate
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

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
    # Set once the long texts are taken out of ``details`` (``rimo_eval.artifacts.text_spool``):
    # then ``details`` is light and these hold the reasoning and raw text, or where to read them.
    texts: StoredTexts | None = field(default=None, repr=False, compare=False)

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
    ("details", pa.string()),  # canonical JSON of backend-specific details, texts apart
    ("backend", pa.string()),
    ("backend_params", pa.string()),  # canonical JSON of the backend's params
    ("fingerprint", pa.string()),  # sha256 of backend identity (params, templates, version)
    ("run_id", pa.string()),  # sha256 of the fingerprint and the whole sample: see run_id()
]
# The run id is also in each file's schema metadata, so an empty table (limit 0) carries one.
RUN_ID_META = b"rimo_eval.run_id"

# The long texts of a reply live in columns of their own, out of ``details``, so a stage that
# needs no reasoning (score, compare, audit, the report) never reads or parses it (issue 20):
# ``reasoning`` (the server's reasoning field and any think block) and ``raw_text`` (the reply
# as sent, only where it differs from ``details.text``, the answer searched for a box). RIMO-N:
# a string or null; RIMO-P: a list with one entry (string or null) per part asked.
REASONING = "reasoning"
RAW_TEXT = "raw_text"
TEXT_COLUMNS = (REASONING, RAW_TEXT)


def _texts(kind: pa.DataType) -> list[tuple[str, pa.DataType]]:
    return [(REASONING, kind), (RAW_TEXT, kind)]


PREDICTION_SCHEMAS = {
    TRACK_N: pa.schema([*_COMMON[:4], ("prediction", pa.string()), *_COMMON[4:7],
                        *_texts(pa.string()), *_COMMON[7:]]),
    TRACK_P: pa.schema([*_COMMON[:4], ("prediction", pa.list_(pa.string())), *_COMMON[4:7],
                        *_texts(pa.list_(pa.string())), *_COMMON[7:]]),
}


def _pop_texts(details: dict[str, Any]) -> tuple[str | None, str | None]:
    """``details`` without its reasoning and raw text, which are returned; a raw text equal to
    the answer text is dropped (``join_texts`` restores it). Keys of another type stay."""
    reasoning = details.get(REASONING)
    raw = details.get(RAW_TEXT)
    if isinstance(reasoning, str) or reasoning is None:
        details.pop(REASONING, None)
    else:
        reasoning = None
    if isinstance(raw, str):
        details.pop(RAW_TEXT)
        raw = None if raw == details.get("text") else raw
    else:
        raw = None
    return reasoning, raw


def split_texts(track: str, details: dict[str, Any]
                ) -> tuple[dict[str, Any], Any, Any]:
    """``(details, reasoning, raw_text)`` as the table stores them (see ``REASONING``); the
    given dict is not changed."""
    if track != TRACK_P:
        light = dict(details)
        return (light, *_pop_texts(light))
    parts = details.get("parts")
    if not isinstance(parts, list):
        return dict(details), None, None
    light_parts, reasoning, raw = [], [], []
    for part in parts:
        light = dict(part) if isinstance(part, dict) else part
        texts = _pop_texts(light) if isinstance(light, dict) else (None, None)
        light_parts.append(light)
        reasoning.append(texts[0])
        raw.append(texts[1])
    return {**details, "parts": light_parts}, reasoning, raw


def join_texts(track: str, details: dict[str, Any], reasoning: Any, raw_text: Any
               ) -> dict[str, Any]:
    """The details with their texts back in (the shape of files written before the split, which
    pass through unchanged): for readers that show whole transcripts."""

    def join(d: dict[str, Any], r: Any, raw: Any) -> dict[str, Any]:
        out = dict(d)
        if r is not None:
            out[REASONING] = r
        if raw is not None:
            out[RAW_TEXT] = raw
        elif RAW_TEXT not in out and isinstance(out.get("text"), str):
            out[RAW_TEXT] = out["text"]
        return out

    if track != TRACK_P:
        return join(details, reasoning, raw_text)
    parts = details.get("parts")
    if not isinstance(parts, list) or reasoning is None:
        return details
    raws = list(raw_text) if raw_text is not None else [None] * len(parts)
    return {**details, "parts": [join(p, r, w) if isinstance(p, dict) else p
                                 for p, r, w in zip(parts, list(reasoning), raws,
                                                    strict=False)]}


class StoredTexts(Protocol):
    """A prediction's ``(reasoning, raw_text)`` as ``split_texts`` returns them."""

    def read(self) -> tuple[Any, Any]: ...


@dataclass(frozen=True)
class InlineTexts:
    """Texts kept in memory (short ones, or none)."""

    reasoning: Any
    raw_text: Any

    def read(self) -> tuple[Any, Any]:
        return self.reasoning, self.raw_text


def split_prediction(pred: Prediction) -> tuple[dict[str, Any], Any, Any]:
    """``split_texts`` of a prediction, reading texts already set apart where they are."""
    if pred.texts is None:
        return split_texts(pred.track, pred.details)
    return (pred.details, *pred.texts.read())


def lone_surrogate(value: str | list[str] | None) -> tuple[str, int] | None:
    """The first unpaired UTF-16 surrogate of a prediction (a string or a list of them) and its
    index, which no UTF-8 file can hold; None when every text encodes."""
    for text in [value] if isinstance(value, str) else value or []:
        found = first_lone_surrogate(text)
        if found:
            return found
    return None


def run_id(fp: str, sample: Mapping[str, Sequence[Item]], samples: int = 1) -> str:
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
# A group also ends once its long texts reach this many characters: building one holds its
# rows, their JSON and the Arrow copy at once, so 1024 rows of reasoning replies (100 MB of
# RIMO-P text) took about 500 MB, and allocator fragmentation let it grow group by group.
# Text lengths are part of the inputs, so where the groups end stays deterministic.
ROW_GROUP_TEXT_CHARS = 8 * 2**20


def text_chars(value: Any) -> int:
    """The characters of a text cell (a string, or RIMO-P's list of them)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(len(v) for v in value if isinstance(v, str))
    return 0


def table_schema(track: str, run: str) -> pa.Schema:
    return PREDICTION_SCHEMAS[track].with_metadata({RUN_ID_META: run.encode()})


def table_groups(track: str, items: Sequence[Item],
                 preds: dict[tuple[str, str, int], Prediction], identity: dict[str, Any],
                 fp: str, samples: int = 1, run: str | None = None,
                 rows_per_group: int | None = None) -> Iterator[pa.Table]:
    """The table in row groups of ``rows_per_group`` rows (fewer where the texts are long:
    ``ROW_GROUP_TEXT_CHARS``), sorted by (problem_id, sample), so
    the file is byte-stable. ``run`` defaults to a run id of this table's items alone
    (one-track callers). An empty table is one empty group."""
    run = run or run_id(fp, {track: items}, samples)
    backend, params = identity["backend"], canonical_json(identity.get("params", {}))

    def rows() -> Iterator[dict[str, Any]]:
        for item in sorted(items, key=lambda it: it.problem_id):
            for j in range(samples):
                pred = preds[(*item.key, j)]
                details, reasoning, raw_text = split_prediction(pred)
                yield {
                    "track": track,
                    "problem_id": item.problem_id,
                    "sample": j,
                    "item_hash": item.content_hash,
                    "prediction": pred.prediction,
                    "status": pred.status,
                    "error": pred.error,
                    "details": canonical_json(details),
                    REASONING: reasoning,
                    RAW_TEXT: raw_text,
                    "backend": backend,
                    "backend_params": params,
                    "fingerprint": fp,
                    "run_id": run,
                }

    yield from row_groups(rows(), table_schema(track, run), rows_per_group)


def row_groups(rows: Iterable[Mapping[str, Any]], schema: pa.Schema,
               rows_per_group: int | None = None) -> Iterator[pa.Table]:
    """Predictions rows (in table order) as the row groups predict writes: ``rows_per_group``
    rows (``ROW_GROUP_ROWS``), fewer where the texts are long (``ROW_GROUP_TEXT_CHARS``). No
    rows are one empty group."""
    rows_per_group = rows_per_group or ROW_GROUP_ROWS
    group: list[Mapping[str, Any]] = []
    emitted, chars = False, 0
    for row in rows:
        group.append(row)
        chars += text_chars(row.get(REASONING)) + text_chars(row.get(RAW_TEXT))
        if len(group) == rows_per_group or chars >= ROW_GROUP_TEXT_CHARS:
            yield table_from_rows(group, schema)
            group, emitted, chars = [], True, 0
    if group or not emitted:
        yield table_from_rows(group, schema)


def build_table(track: str, items: Sequence[Item],
                preds: dict[tuple[str, str, int], Prediction], identity: dict[str, Any], fp: str,
                samples: int = 1, run: str | None = None) -> pa.Table:
    """The whole table in memory (``table_groups`` joined)."""
    return pa.concat_tables(list(table_groups(track, items, preds, identity, fp, samples, run)))


def write_table(table: pa.Table, path: str | os.PathLike[str]) -> None:
    write_parquet(table, path)


def write_groups(groups: Iterator[pa.Table], schema: pa.Schema, tmp: Path) -> None:
    """``table_groups`` into an unpublished temporary file (see ``rimo_eval.io.atomic``)."""
    write_row_groups(groups, schema, tmp)


def parse_details(raw: Any) -> dict[str, Any]:
    """A predictions row's ``details`` (canonical JSON) as a dict; ``{}`` when absent or bad."""
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def read_run_id(path: str | os.PathLike[str]) -> str | None:
    """The run id a predictions file was written with (None: written before run ids)."""
    meta = pq.read_schema(path).metadata or {}
    value = meta.get(RUN_ID_META)
    return value.decode() if value else None


def light_columns(path: str | os.PathLike[str]) -> list[str]:
    """Every column of a predictions file but the long texts (``TEXT_COLUMNS``)."""
    return [c for c in pq.read_schema(path).names if c not in TEXT_COLUMNS]


def read_predictions(track: str, out_dir: str | os.PathLike[str] = PREDICTIONS_DIR,
                     texts: bool = False) -> pd.DataFrame:
    """A predictions table; without the reasoning and raw-text columns unless ``texts``."""
    import pandas as pd  # lazily: predict writes tables with pyarrow and needs no pandas

    path = predictions_path(track, out_dir)
    if not path.exists():
        raise DataError(f"{path}: predictions not found (run the predict stage first)")
    return pd.read_parquet(path, columns=None if texts else light_columns(path))

