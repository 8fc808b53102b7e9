"""Replay predictions produced elsewhere: our JSONL format or the upstream scripts' CSVs.

JSONL lines are ``{"track", "problem_id", "prediction"}`` (a string for RIMO-N, a list of strings
for RIMO-P). CSVs are ``problem_id,llm_answer`` (RIMO-N) or ``problem_id,llm_solution1..4``
(RIMO-P). ``path`` may also be a folder of such files.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from stages import TRACK_N, TRACK_P, TRACKS
from stages.errors import StageError
from stages.hashing import sha256_file
from stages.items import Item
from stages.predictors.base import STATUS_MISSING, Prediction, Predictor

P_COLUMNS = [f"llm_solution{i}" for i in range(1, 5)]


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".jsonl", ".csv"))
        if not files:
            raise StageError(f"{path}: replay folder holds no .jsonl or .csv file")
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


def read_jsonl(path: Path) -> Iterator[tuple[str, str, str | list[str], str]]:
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = json.loads(line, parse_constant=_reject_constant)
            except (json.JSONDecodeError, ValueError) as exc:
                raise StageError(f"{where}: rule replay.json: {exc}") from exc
            if not isinstance(rec, dict) or not {"track", "problem_id", "prediction"} <= rec.keys():
                raise StageError(f"{where}: rule replay.fields: need track, problem_id and "
                                 f"prediction")
            track, pid = rec["track"], rec["problem_id"]
            if track not in TRACKS or not isinstance(pid, str):
                raise StageError(f"{where}: rule replay.fields: track must be one of {TRACKS} "
                                 f"and problem_id a string")
            where = f"{where} id={pid}"
            yield track, pid, _check_value(track, rec["prediction"], where), where


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def read_csv(path: Path) -> Iterator[tuple[str, str, str | list[str], str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        cols = reader.fieldnames or []
        if "problem_id" in cols and "llm_answer" in cols:
            track = TRACK_N
        elif "problem_id" in cols and set(P_COLUMNS) & set(cols):
            track = TRACK_P
        else:
            raise StageError(f"{path}: rule replay.columns: expected problem_id with llm_answer "
                             f"(RIMO-N) or llm_solution1..4 (RIMO-P), got {cols}")
        for row in reader:
            where = f"{path}:{reader.line_num} id={row['problem_id']}"
            if track == TRACK_N:
                value: str | list[str] = row["llm_answer"] or ""
            else:
                parts = [row.get(c) or "" for c in P_COLUMNS]
                while parts and not parts[-1]:  # unused trailing columns are empty
                    parts.pop()
                value = parts
            yield track, row["problem_id"], value, where


def load_replay(path: Path, known: frozenset[tuple[str, str]]
                ) -> dict[tuple[str, str], str | list[str]]:
    out: dict[tuple[str, str], str | list[str]] = {}
    seen_at: dict[tuple[str, str], str] = {}
    for file in _files(path):
        reader = read_csv if file.suffix == ".csv" else read_jsonl
        for track, pid, value, where in reader(file):
            key = (track, pid)
            if key in out:
                raise StageError(f"{where}: rule replay.duplicate: {track} {pid} already given "
                                 f"at {seen_at[key]}")
            if key not in known:
                raise StageError(f"{where}: rule replay.unknown_id: {track} {pid} is not a "
                                 f"benchmark item")
            out[key], seen_at[key] = value, where
    return out


class ReplayPredictor(Predictor):
    name = "replay"

    def __init__(self, config: dict | None = None) -> None:
        super().__init__(config)
        path = self.config.get("path")
        if not path:
            raise StageError("params.yaml: predict.replay.path must name a file or folder")
        self.path = Path(path)

    def identity(self) -> dict[str, Any]:
        # The file contents, not just the path, decide the predictions.
        files = {p.as_posix(): sha256_file(p) for p in _files(self.path)}
        return {**super().identity(), "files": files}

    def predict(self, items: Sequence[Item]) -> Iterator[Prediction]:
        known = self.known_keys or frozenset(it.key for it in items)
        replay = load_replay(self.path, known)
        for item in items:
            if item.key in replay:
                yield Prediction(item.track, item.problem_id, replay[item.key])
            else:
                yield Prediction(item.track, item.problem_id, None, status=STATUS_MISSING,
                                 error=f"not in replay {self.path}")
