"""Content hashes and fingerprints used for provenance."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    """Hex digest of a file read in chunks (md5 is what dvc.lock records)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    return file_digest(path, "sha256")


def canonical_json(obj: Any) -> str:
    """One byte-stable serialisation of JSON-like data, the input of every fingerprint."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def fingerprint(obj: Any) -> str:
    return sha256_bytes(canonical_json(obj).encode("utf-8"))
