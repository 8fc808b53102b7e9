"""Replay predictions produced elsewhere: our JSONL format, the upstream scripts' CSVs, or the
logs of other tools (inspect_ai ``.eval``, lm-eval ``--log_samples``, Every Eval Ever instance
JSONL: ``replay_foreign``, graded by RIMO's recipe, never the tool's scorer).

JSONL lines are ``{"track", "problem_id", "prediction"}`` (a string for RIMO-N, a list of strings
for RIMO-P), with an optional ``"sample": j`` (0-based, below predict.samples; absent means 0).
Instead of ``prediction`` a line may give ``reply``: the model's whole reply (RIMO-P: one per
part), read by the same extraction as a chat backend's. CSVs are ``problem_id,llm_answer``
(RIMO-N) or ``problem_id,llm_solution1..4`` (RIMO-P). ``path`` may also be a folder of such
files. Each file's format is told from its content (``predict.replay.format: auto``) or named.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.items import Item
from rimo_eval.artifacts.predictions import lone_surrogate
from rimo_eval.errors import StageError
from rimo_eval.io.hashing import sha256_file
from rimo_eval.io.jsonl import iter_lines, noting_repeats, parse_line
from rimo_eval.io.terminal import for_terminal
from rimo_eval.params.offline import ReplayParams
from rimo_eval.params.section import Section
from rimo_eval.predictors import extract
from rimo_eval.predictors.base import (
    STATUS_ERROR,
    STATUS_MISSING,
    STATUS_OK,
    Prediction,
    Predictor,
    own_section,
)
from rimo_eval.predictors.foreign import CSV, RIMO, detect
from rimo_eval.predictors.replay_foreign import Replayed, grade_reply, read_foreign, source_of
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS

P_COLUMNS = [f"llm_solution{i}" for i in range(1, 5)]
MAX_CSV_FIELD = 1 << 30  # characters in one CSV field
SUFFIXES = (".jsonl", ".csv", ".eval")


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES)
        if not files:
            raise StageError(f"{path}: replay folder holds no .jsonl, .csv or .eval file")
        return files
    if not path.is_file():
        raise StageError(f"{path}: replay file not found (predict.replay.path)")
    return [path]


def _check_value(track: str, value: Any, where: str) -> str | list[str]:
    if track == TRACK_N:
        if not isinstance(value, str):
            raise StageError(f"{where}: rule replay.type: RIMO-N prediction must be a string, "
                             f"got {type(value).__name__}")
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise StageError(f"{where}: rule replay.type: RIMO-P prediction must be a list of "
                         f"strings")
    return value


def _check_text(value: str | list[str], where: str) -> None:
    """A JSON escape like \\ud800 without its pair gives a string no UTF-8 file can hold."""
    bad = lone_surrogate(value)
    if bad is not None:
        raise StageError(f"{where}: rule replay.encoding: unpaired UTF-16 surrogate "
                         f"{bad[0]!r} at character {bad[1]}")


def _decode(path: Path) -> str:
    """The file as text (a leading UTF-8 BOM dropped); bad bytes are an error naming the line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise StageError(f"{path}:{line}: rule replay.encoding: invalid UTF-8 at byte offset "
                         f"{exc.start} ({exc.reason})") from exc


# (track, problem_id, sample, replayed, where): one replayed prediction and its file:line.
Row = tuple[str, str, int, Replayed, str]


def _sample(rec: dict[str, Any], where: str) -> int:
    j: object = rec.get("sample", 0)
    # bool is an int in Python; true must not quietly become sample 1.
    if isinstance(j, bool) or not isinstance(j, int) or j < 0:
        raise StageError(f"{where}: rule replay.sample: sample must be an integer >= 0, "
                         f"got {j!r}")
    return j


def read_jsonl(path: Path) -> Iterator[Row]:
    # The project's one JSONL reader (rimo_eval.io.jsonl): same line split and strictness.
    for lineno, line in iter_lines(_decode(path)):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        repeats: list[str] = []
        try:
            rec = parse_line(line, object_pairs_hook=noting_repeats(repeats))
        except ValueError as exc:
            raise StageError(f"{where}: rule replay.json: {exc}") from exc
        if repeats:
            # json.loads keeps the last copy: which prediction was meant is not known.
            raise StageError(f"{where}: rule replay.duplicate_key: key {repeats[0]!r} given "
                             f"twice in one line")
        if (not isinstance(rec, dict) or not {"track", "problem_id"} <= rec.keys()
                or ("prediction" in rec) == ("reply" in rec)):
            raise StageError(f"{where}: rule replay.fields: need track, problem_id and one of "
                             f"prediction (the answer) or reply (the whole reply)")
        track, pid = rec["track"], rec["problem_id"]
        if track not in TRACKS or not isinstance(pid, str):
            raise StageError(f"{where}: rule replay.fields: track must be one of {TRACKS} "
                             f"and problem_id a string")
        where = f"{where} id={pid}"
        j = _sample(rec, where)
        value = _check_value(track, rec.get("prediction", rec.get("reply")), where)
        _check_text(value, where)
        if "reply" in rec:
            texts = [value] if isinstance(value, str) else value
            yield track, pid, j, grade_reply(track, texts), where
        else:
            yield track, pid, j, Replayed(value), where


def read_csv(path: Path) -> Iterator[Row]:
    # strict: an unterminated quote is an error, not a field that runs to the end of the file.
    reader = csv.reader(io.StringIO(_decode(path), newline=""), strict=True)
    old_limit = csv.field_size_limit(MAX_CSV_FIELD)  # model output can pass the 128 KiB default
    try:
        records = [(reader.line_num, rec) for rec in reader if rec]  # blank lines: no record
    except csv.Error as exc:
        raise StageError(f"{path}:{reader.line_num}: rule replay.csv: {exc}") from exc
    finally:
        csv.field_size_limit(old_limit)
    cols = records[0][1] if records else []
    if "problem_id" in cols and "llm_answer" in cols:
        track = TRACK_N
    elif "problem_id" in cols and set(P_COLUMNS) & set(cols):
        track = TRACK_P
    else:
        raise StageError(f"{path}: rule replay.columns: expected problem_id with llm_answer "
                         f"(RIMO-N) or llm_solution1..4 (RIMO-P), got {cols}")
    for line_num, rec in records[1:]:
        row = dict(zip(cols, rec, strict=False))
        where = f"{path}:{line_num} id={row.get('problem_id')}"
        # An unquoted comma or a cut-off record must not quietly become another prediction.
        if len(rec) != len(cols):
            raise StageError(f"{where}: rule replay.csv: {len(rec)} fields, the header has "
                             f"{len(cols)}")
        if track == TRACK_N:
            value: str | list[str] = row["llm_answer"]
        else:
            parts = [row.get(c) or "" for c in P_COLUMNS]
            while parts and not parts[-1]:  # unused trailing columns are empty
                parts.pop()
            value = parts
        yield track, row["problem_id"], 0, Replayed(value), where  # upstream: one sample


def file_format(file: Path, fmt: str) -> str:
    """The file's format: ``fmt`` as named, or told from its content (``auto``)."""
    return detect(file) if fmt == "auto" else fmt


def _rows(file: Path, fmt: str, items: Sequence[Item], known: frozenset[tuple[str, str]]
          ) -> Iterator[Row]:
    if fmt == CSV:
        return read_csv(file)
    if fmt == RIMO:
        return read_jsonl(file)
    return read_foreign(file, fmt, items, known)


def load_replay(path: Path, known: frozenset[tuple[str, str]], samples: int = 1,
                items: Sequence[Item] = (), fmt: str = "auto"
                ) -> dict[tuple[str, str, int], Replayed]:
    out: dict[tuple[str, str, int], Replayed] = {}
    seen_at: dict[tuple[str, str, int], str] = {}
    for file in _files(path):
        for track, pid, j, value, where in _rows(file, file_format(file, fmt), items, known):
            key = (track, pid, j)
            if key in out:
                raise StageError(f"{where}: rule replay.duplicate: {track} {pid} sample {j} "
                                 f"already given at {seen_at[key]}")
            if (track, pid) not in known:
                raise StageError(f"{where}: rule replay.unknown_id: {track} {pid} is not a "
                                 f"benchmark item")
            if j >= samples:
                raise StageError(f"{where}: rule replay.sample: sample {j} needs "
                                 f"predict.samples > {j}, it is {samples}")
            out[key], seen_at[key] = value, where
    if not out:
        # Every item missing and exit 0 would look like a model that answered nothing.
        raise StageError(f"{path}: rule replay.empty: no prediction in the replay "
                         f"(predict.replay.path)")
    return out


class ReplayPredictor(Predictor):
    name = "replay"

    def __init__(self, config: Section | None = None) -> None:
        super().__init__(config)
        params = own_section(ReplayParams, config, "predict.replay")  # path: required, checked
        self.path = Path(params.path)
        self.format: str = params.format

    def identity(self) -> dict[str, Any]:
        # The file contents, not just the path, decide the predictions.
        files = {p.as_posix(): sha256_file(p) for p in _files(self.path)}
        ident = {**super().identity(), "files": files}
        # Another tool's log: which tool and version wrote it, and its hash, go into the
        # predictions' backend_params (their provenance; audit recomputes the fingerprint, so
        # an edited log is caught), and the extraction's version into the fingerprint.
        sources = {}
        for p in _files(self.path):
            fmt = file_format(p, self.format)
            if fmt not in (RIMO, CSV):
                src = source_of(p, fmt)
                sources[p.as_posix()] = {"tool": src.tool, "version": src.version,
                                         "sha256": files[p.as_posix()]}
        if sources:
            ident["params"] = {**ident["params"], "sources": sources}
            ident["extraction"] = extract.VERSION
        return ident

    def predict(self, items: Sequence[Item]) -> Iterator[Prediction]:
        known = self.known_keys or frozenset(it.key for it in items)
        replay = load_replay(self.path, known, self.samples, items, self.format)
        covered = {key[:2] for key in replay}
        hit = sum(1 for it in items if it.key in covered)
        if items and not hit:
            # Every requested item missing and exit 0 would read as a model that answered
            # nothing: the file is for other items (another sample, seed or benchmark slice).
            shown = ", ".join(f"{it.track} {it.problem_id}" for it in items[:3])
            raise StageError(f"{self.path}: rule replay.coverage: the replay covers none of "
                             f"the {len(items)} requested items ({shown}"
                             f"{', ...' if len(items) > 3 else ''}); it holds "
                             f"{len(covered)} other item(s): check predict.replay.path, "
                             f"predict.limit and predict.sample_seed")
        if items and hit * 2 < len(items):
            print(for_terminal(f"predict: warning: replay {self.path} covers {hit} of the "
                               f"{len(items)} requested items; the other {len(items) - hit} "
                               "are recorded as missing (counted wrong)"), file=sys.stderr)
        for item in items:
            for j in range(self.samples):
                key = (*item.key, j)
                if key in replay:
                    got = replay[key]
                    yield Prediction(item.track, item.problem_id, got.prediction,
                                     status=STATUS_ERROR if got.error else STATUS_OK,
                                     error=got.error, details=dict(got.details), sample=j)
                else:
                    yield Prediction(item.track, item.problem_id, None, status=STATUS_MISSING,
                                     error=f"not in replay {self.path}", sample=j)
