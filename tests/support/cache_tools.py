"""Reading and damaging the response cache from tests, below its public API."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import zstandard

from rimo_eval.chat.cache import DB_NAME, Entry, ResponseCache
from rimo_eval.io.hashing import canonical_json


def cache_entries(folder: str | os.PathLike[str]) -> list[Entry]:
    """Every entry in key order (none when there is no database yet)."""
    cache = ResponseCache(folder)
    try:
        return list(cache.entries())
    finally:
        cache.close()


def cache_text(folder: str | os.PathLike[str]) -> str:
    """Everything the cache holds, readable: each entry decoded, and every file's raw bytes
    (so a secret can be looked for whether it was compressed or not)."""
    decoded = [canonical_json([e.key, e.model, e.endpoint, e.request, e.response])
               for e in cache_entries(folder)]
    raw = [p.read_bytes().decode("latin-1") for p in Path(folder).rglob("*") if p.is_file()]
    return "\n".join(decoded + raw)


def set_data(folder: str | os.PathLike[str], key: str, data: bytes) -> None:
    """Overwrite the stored bytes of one entry, as a disk fault or another program might."""
    with sqlite3.connect(Path(folder) / DB_NAME) as conn:
        assert conn.execute("UPDATE entries SET data = ? WHERE key = ?",
                            (data, key)).rowcount == 1
    conn.close()


def compress(obj: object) -> bytes:
    return zstandard.ZstdCompressor().compress(canonical_json(obj).encode("utf-8"))


def pages_of(db: Path, name: str, pagetype: str) -> list[int]:
    """The page numbers of one table or index (``dbstat``), of one type (leaf, internal,
    overflow), ascending."""
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = ? ORDER BY pageno",
            (name, pagetype))]
    finally:
        conn.close()


def overwrite_page(db: Path, page: int, data: bytes) -> None:
    """Write ``data`` at the start of page ``page`` (1-based) of the file: a disk fault."""
    with open(db, "r+b") as fh:
        fh.seek((page - 1) * 4096)
        fh.write(data)


def noisy(i: int) -> dict:
    """A reply that does not compress much (a few entries per page, as real ones)."""
    rng = random.Random(i)
    return {"texts": ["".join(rng.choice("0123456789abcdef") for _ in range(1500))],
            "finish_reason": "stop"}


REASONING = "Let me think step by step about the claim. " * 750  # ~32 KB, a reasoning reply


def payload(i: int, model: str = "m") -> dict:
    return {"endpoint": {"transport": "openai-chat", "base_url": "http://127.0.0.1:1/v1"},
            "request": {"model": model, "messages": [{"role": "user", "content": f"q{i}"}]}}


def response(i: int) -> dict:
    return {"texts": [f"{REASONING}answer {i}"], "finish_reason": "stop"}
