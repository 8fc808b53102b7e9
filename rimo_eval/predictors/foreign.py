"""Replies logged by other tools, read for the replay backend: lm-eval ``--log_samples`` JSONL and
Every Eval Ever instance JSONL here, inspect_ai ``.eval`` logs in ``foreign_inspect``.

Each reader yields ``Reply`` records: the tool's raw reply, never its score (RIMO's recipe grades
it: ``replay``), with what identifies the item (the sample id and the problem text), the sample
index, reasoning, token usage and any error. ``detect`` tells the format from the content.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rimo_eval.errors import StageError
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS

RIMO, CSV, INSPECT, LMEVAL, EEE = "rimo", "csv", "inspect_ai", "lm_eval", "every_eval_ever"
FORMATS = (RIMO, CSV, INSPECT, LMEVAL, EEE)
ZIP_MAGIC = b"PK\x03\x04"


@dataclass(frozen=True)
class Reply:
    """One sample's reply as another tool logged it (RIMO-P: one reply per part)."""

    where: str  # file:line or file:member, for errors
    sample_id: str | None
    problem: str | None
    sample: int  # 0-based repeat index (inspect's epoch - 1)
    texts: list[str] | None  # None: the tool logged an error instead of a reply
    track: str = TRACK_N
    reasoning: list[str | None] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    finish_reason: str | None = None
    # The prediction as the file states it, preferred to RIMO's extraction of ``texts``: a
    # RIMO export's reply made from a bare prediction (``metadata.output_raw: prediction``),
    # whose \boxed{} cannot hold a prediction with unbalanced braces.
    prediction: str | None = None


@dataclass(frozen=True)
class Source:
    """Which tool wrote a file, and its version (None where the file does not say)."""

    tool: str
    version: str | None


def _first_record(path: Path) -> Any:
    with open(path, "rb") as fh:
        for raw in fh:
            if raw.strip():
                try:
                    return json.loads(raw.decode("utf-8-sig"))
                except ValueError:
                    return None
    return None


def detect(path: Path) -> str:
    """The format of one replay file, from its content (the suffix only for CSV)."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head == ZIP_MAGIC or path.suffix == ".eval":
        return INSPECT
    if path.suffix == ".csv":
        return CSV
    rec = _first_record(path)
    if rec is None and path.suffix == ".json":  # one pretty-printed object: lm-eval's results
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            rec = None
    if isinstance(rec, dict):
        if "resps" in rec or "doc_id" in rec:
            return LMEVAL
        if "evaluation_id" in rec and "sample_id" in rec:
            return EEE
        if "lm_eval_version" in rec or ("results" in rec and "configs" in rec):
            raise StageError(f"{path}: rule replay.lm_eval: this is lm-eval's aggregate results "
                             f"file, not its per-sample log: rerun lm-eval with --log_samples "
                             f"and give the samples_<task>_<date>.jsonl file")
    return RIMO


def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    from rimo_eval.io.jsonl import iter_lines, parse_line

    for lineno, line in iter_lines(path.read_text(encoding="utf-8-sig")):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            rec = parse_line(line)
        except ValueError as exc:
            raise StageError(f"{where}: rule replay.json: {exc}") from exc
        if not isinstance(rec, dict):
            raise StageError(f"{where}: rule replay.json: a line must be a JSON object")
        yield where, rec


def lmeval_source(path: Path) -> Source:
    """lm-eval writes its version into the results file beside the samples (same timestamp)."""
    stamp = path.stem.rsplit("_", 1)[-1]
    results = path.with_name(f"results_{stamp}.json")
    version = None
    if results.is_file():
        try:
            version = json.loads(results.read_text(encoding="utf-8")).get("lm_eval_version")
        except ValueError:
            version = None
    return Source(LMEVAL, version if isinstance(version, str) else None)


def read_lmeval(path: Path) -> Iterator[Reply]:
    """``samples_<task>_<date>.jsonl``: ``doc`` (the upstream row), ``resps`` ([[reply, ...]])."""
    for where, rec in _lines(path):
        if not {"doc", "resps"} <= rec.keys() or not isinstance(rec["doc"], dict):
            raise StageError(f"{where}: rule replay.lm_eval: no doc and resps fields: not an "
                             f"lm-eval --log_samples line")
        doc, resps = rec["doc"], rec["resps"]
        replies = resps[0] if isinstance(resps, list) and resps else None
        if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
            raise StageError(f"{where}: rule replay.lm_eval: resps must be [[reply, ...]] of "
                             f"generate_until strings, got {str(resps)[:80]!r}")
        pid, problem = doc.get("problem_id"), doc.get("problem")
        for j, text in enumerate(replies):
            yield Reply(where, str(pid) if pid is not None else None,
                        problem if isinstance(problem, str) else None, j, [text])


def _strings(value: Any, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise StageError(f"{where}: rule replay.eee: {key} must be a list of strings")
    return value


def eee_source(path: Path) -> Source:
    return Source(EEE, None)


def read_eee(path: Path) -> Iterator[Reply]:
    """Every Eval Ever 0.3.0 instance rows: ``output.raw`` is the reply (RIMO-P: one per part,
    as ``rimo-eval export`` writes them); ``metadata.track`` and ``metadata.sample`` say the
    track and the sample index where a RIMO export wrote them (default RIMO-N, 0); a row whose
    ``metadata.status`` is missing is left out (the item has no reply: missing, as the run); an
    error row with no reply is an error; a row whose ``metadata.output_raw`` is ``prediction``
    (RIMO-N) gives its ``answer_attribution`` value as the prediction."""
    for where, rec in _lines(path):
        if not {"sample_id", "input", "evaluation_id"} <= rec.keys():
            raise StageError(f"{where}: rule replay.eee: need sample_id, input and "
                             f"evaluation_id: not an Every Eval Ever instance row")
        meta = rec.get("metadata") or {}
        if meta.get("status") == "missing":
            continue  # a RIMO export's row of a sample the run had no reply for: missing
        track = meta.get("track", TRACK_N)
        if track not in TRACKS:
            raise StageError(f"{where}: rule replay.eee: metadata.track must be one of "
                             f"{TRACKS}, got {track!r}")
        try:
            j = int(meta.get("sample", "0"))
        except ValueError as exc:
            raise StageError(f"{where}: rule replay.eee: metadata.sample must be an integer "
                             f"string") from exc
        output = rec.get("output") or {}
        error = rec.get("error")
        texts = _strings(output.get("raw"), where, "output.raw") if output else None
        if error and not texts:
            texts = None  # the tool logged an error instead of a reply (an export: raw is [])
        trace = output.get("reasoning_trace") if output else None
        reasoning: list[str | None] = list(_strings(trace, where, "output.reasoning_trace")
                                           if trace is not None else [])
        usage = rec.get("token_usage") or {}
        counts = {"prompt_tokens": usage.get("input_tokens", 0),
                  "completion_tokens": usage.get("output_tokens", 0),
                  "reasoning_tokens": usage.get("reasoning_tokens") or 0}
        if texts is not None and track == TRACK_N and len(texts) != 1:
            raise StageError(f"{where}: rule replay.eee: a RIMO-N row holds one reply in "
                             f"output.raw, got {len(texts)}")
        problem = (rec.get("input") or {}).get("raw")
        stated = _stated(rec) if texts and track == TRACK_N else None
        yield Reply(where, str(rec["sample_id"]), problem if isinstance(problem, str) else None,
                    j, texts, track=track,
                    reasoning=reasoning, usage=counts,
                    error=error if isinstance(error, str) else None,
                    finish_reason=meta.get("finish_reason"), prediction=stated)


def _stated(rec: dict[str, Any]) -> str | None:
    """A RIMO export's bare prediction (the last ``answer_attribution``'s value) where its
    ``output.raw`` was made from it: ``\\boxed{a}b}`` would extract as ``a``."""
    if (rec.get("metadata") or {}).get("output_raw") != "prediction":
        return None
    found = [a.get("extracted_value") for a in rec.get("answer_attribution") or []
             if isinstance(a, dict)]
    return found[-1] if found and isinstance(found[-1], str) else None


__all__ = ["CSV", "EEE", "FORMATS", "INSPECT", "LMEVAL", "RIMO", "TRACK_P", "Reply", "Source",
           "detect", "eee_source", "lmeval_source", "read_eee", "read_lmeval"]
