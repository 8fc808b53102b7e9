"""inspect_ai ``.eval`` logs, read without inspect_ai: a zip of JSON members (``header.json``,
``samples/<id>_epoch_<n>.json``), compressed with Zstandard (method 93) since 0.3.x, which
Python's zipfile reads only from 3.14: those members are decompressed here from their raw bytes.

Only what grading needs is taken: the reply (the text parts of the output message), its
reasoning parts, the token usage, the stop reason and any sample error. Long strings that
inspect moved to ``attachments`` (``attachment://<hash>``) are put back.
"""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import zstandard

from rimo_eval.errors import StageError
from rimo_eval.predictors.foreign import INSPECT, Reply, Source

ZSTD = 93  # the zip compression method inspect writes
LOCAL_HEADER = 30  # bytes of a zip local file header before its name and extra field
ATTACHMENT = "attachment://"


def _member(archive: zipfile.ZipFile, fh: IO[bytes], name: str) -> bytes:
    info = archive.getinfo(name)
    if info.compress_type != ZSTD:
        return archive.read(name)
    fh.seek(info.header_offset)
    head = fh.read(LOCAL_HEADER)
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    fh.seek(info.header_offset + LOCAL_HEADER + name_len + extra_len)
    raw = fh.read(info.compress_size)
    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    return reader.read()


def _json(archive: zipfile.ZipFile, fh: IO[bytes], path: Path, name: str) -> dict[str, Any]:
    try:
        data = json.loads(_member(archive, fh, name))
    except (zipfile.BadZipFile, zstandard.ZstdError, ValueError, KeyError, OSError) as exc:
        raise StageError(f"{path}:{name}: rule replay.inspect: unreadable member ({exc}): a "
                         f"truncated or damaged .eval log") from exc
    if not isinstance(data, dict):
        raise StageError(f"{path}:{name}: rule replay.inspect: not a JSON object")
    return data


def _open(path: Path) -> tuple[zipfile.ZipFile, IO[bytes]]:
    fh = open(path, "rb")  # noqa: SIM115 -- closed by the caller with the archive
    try:
        return zipfile.ZipFile(fh), fh
    except (zipfile.BadZipFile, OSError) as exc:
        fh.close()
        raise StageError(f"{path}: rule replay.inspect: not a whole zip ({exc}): a truncated "
                         f"or damaged .eval log") from exc


def _header(archive: zipfile.ZipFile, fh: IO[bytes], path: Path) -> dict[str, Any]:
    if "header.json" not in archive.namelist():
        raise StageError(f"{path}: rule replay.inspect: no header.json: the eval did not finish "
                         f"writing its log (or this is not an inspect_ai .eval log)")
    header = _json(archive, fh, path, "header.json")
    status = header.get("status")
    if status != "success":
        raise StageError(f"{path}: rule replay.inspect: the log's status is {status!r}, not "
                         f"'success': the eval did not finish; rerun or retry it in inspect "
                         f"(inspect eval-retry) and replay the finished log")
    return header


def inspect_source(path: Path) -> Source:
    archive, fh = _open(path)
    with fh, archive:
        header = _header(archive, fh, path)
    version = (header.get("eval") or {}).get("packages", {}).get("inspect_ai")
    return Source(INSPECT, version if isinstance(version, str) else None)


def _resolve(value: Any, attachments: dict[str, str]) -> Any:
    if isinstance(value, str) and value.startswith(ATTACHMENT):
        return attachments.get(value[len(ATTACHMENT):], value)
    return value


def _content(content: Any, attachments: dict[str, str]) -> tuple[str, str | None]:
    """(text, reasoning) of a message's content: a string, or a list of typed parts."""
    if isinstance(content, str):
        return _resolve(content, attachments), None
    texts, thoughts = [], []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            texts.append(_resolve(part.get("text", ""), attachments))
        elif part.get("type") == "reasoning" and not part.get("redacted"):
            thoughts.append(_resolve(part.get("reasoning", ""), attachments))
    return "".join(texts), "\n\n".join(thoughts) if thoughts else None


def _problem(sample: dict[str, Any], attachments: dict[str, str]) -> str | None:
    value = sample.get("input")
    if isinstance(value, list):  # chat messages: the last user turn holds the problem
        users = [m for m in value if isinstance(m, dict) and m.get("role") == "user"]
        value = _content(users[-1].get("content"), attachments)[0] if users else None
    value = _resolve(value, attachments)
    return value if isinstance(value, str) else None


def _reply(path: Path, name: str, sample: dict[str, Any]) -> Reply:
    attachments = sample.get("attachments") or {}
    where = f"{path}:{name}"
    epoch = sample.get("epoch", 1)
    sid = sample.get("id")
    problem = _problem(sample, attachments)
    if not isinstance(epoch, int) or epoch < 1:
        raise StageError(f"{where}: rule replay.inspect: epoch must be an integer >= 1")
    base = Reply(where, None if sid is None else str(sid), problem, epoch - 1, None)
    error = sample.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else str(error)
        return replace(base, error=f"inspect_ai sample error: {message}")
    output = sample.get("output") or {}
    choices = output.get("choices") or []
    if not choices:
        message = output.get("error") or "no choices in the output"
        return replace(base, error=f"inspect_ai: {message}")
    text, reasoning = _content((choices[0].get("message") or {}).get("content"), attachments)
    usage = output.get("usage") or {}
    counts = {"prompt_tokens": int(usage.get("input_tokens") or 0),
              "completion_tokens": int(usage.get("output_tokens") or 0),
              "reasoning_tokens": int(usage.get("reasoning_tokens") or 0)}
    stop = choices[0].get("stop_reason")
    return replace(base, texts=[text], reasoning=[reasoning], usage=counts,
                   finish_reason="length" if stop == "max_tokens" else stop)


def read_inspect(path: Path) -> Iterator[Reply]:
    archive, fh = _open(path)
    with fh, archive:
        _header(archive, fh, path)
        names = sorted(n for n in archive.namelist()
                       if n.startswith("samples/") and n.endswith(".json"))
        for name in names:
            yield _reply(path, name, _json(archive, fh, path, name))


__all__ = ["inspect_source", "read_inspect"]
