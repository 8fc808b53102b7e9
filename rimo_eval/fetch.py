"""Stage fetch: the four upstream files at the pinned revision, verified by sha256.

Local mirrors are tried before the network; the result lands in ``data/raw`` only once every
file is verified, so a failure leaves the previous ``data/raw`` (or none) untouched.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from rimo_eval.artifacts.paths import RAW_DIR
from rimo_eval.errors import DataError, IntegrityError, StageError
from rimo_eval.io.hashing import sha256_bytes, sha256_file
from rimo_eval.params.config import FetchParams, Params


def pinned(cfg: FetchParams) -> dict[str, str]:
    """file -> expected sha256, lower-cased (params may spell a hash in upper case)."""
    return {name: sha.lower() for name, sha in cfg.sha256.items()}


def url(cfg: FetchParams, name: str) -> str:
    return cfg.url_template.format(repo=cfg.repo, revision=cfg.revision, folder=cfg.folder,
                                   file=name)


def _log(msg: str) -> None:
    print(f"fetch: {msg}", file=sys.stderr)


def check_mirror(cfg: FetchParams, mirror: Path) -> list[str]:
    """Problems that rule a mirror out (empty list: every file is there and matches)."""
    problems = []
    for name, expected in pinned(cfg).items():
        path = mirror / name
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        actual = sha256_file(path)
        if actual != expected:
            problems.append(f"{path}: sha256 mismatch: expected {expected}, got {actual}")
    return problems


def download(url: str, timeout_s: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            data: bytes = resp.read()
            return data
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DataError(f"{url}: download failed: {exc}") from exc


def _stage_from_mirror(cfg: FetchParams, mirror: Path, staging: Path) -> None:
    for name, expected in pinned(cfg).items():
        shutil.copyfile(mirror / name, staging / name)
        # Re-hash the copy: the mirror could change between the check and the copy.
        actual = sha256_file(staging / name)
        if actual != expected:
            raise IntegrityError(f"{mirror / name}: sha256 mismatch while copying: "
                             f"expected {expected}, got {actual}")


def _stage_from_network(cfg: FetchParams, staging: Path) -> None:
    for name, expected in pinned(cfg).items():
        address = url(cfg, name)
        _log(f"downloading {address}")
        data = download(address, float(cfg.timeout_s))
        actual = sha256_bytes(data)
        if actual != expected:
            raise IntegrityError(f"{name}: sha256 mismatch for {address}: expected {expected}, "
                             f"got {actual}")
        (staging / name).write_bytes(data)


def _backup_of(out_dir: Path) -> Path:
    return out_dir.with_name(f".{out_dir.name}.old")


def _recover(out_dir: Path) -> None:
    """Undo a swap killed between its two renames: the backup is the previous folder."""
    backup = _backup_of(out_dir)
    if backup.is_dir() and not out_dir.exists():
        backup.rename(out_dir)


def _publish(staging: Path, out_dir: Path) -> None:
    """Swap the verified folder into place; the old one is removed only after the swap."""
    backup = None
    if out_dir.exists():
        backup = _backup_of(out_dir)
        shutil.rmtree(backup, ignore_errors=True)
        out_dir.rename(backup)
    staging.rename(out_dir)
    if backup is not None:
        shutil.rmtree(backup, ignore_errors=True)


def fetch(cfg: FetchParams, out_dir: Path = RAW_DIR) -> str:
    """Fill ``out_dir`` with the verified files; return the source used (a mirror or 'network')."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _recover(out_dir)
    rejected: list[str] = []
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=out_dir.parent) as tmp:
        staging = Path(tmp) / "raw"
        staging.mkdir()
        source = None
        for mirror in map(Path, cfg.mirrors):
            if not mirror.is_dir():
                continue
            problems = check_mirror(cfg, mirror)
            if problems:
                rejected.extend(problems)
                _log(f"mirror {mirror} not used: " + "; ".join(problems))
                continue
            _stage_from_mirror(cfg, mirror, staging)
            source = str(mirror)
            break
        if source is None:
            try:
                _stage_from_network(cfg, staging)
            except StageError as exc:
                detail = "".join(f"\n  mirror: {p}" for p in rejected)
                raise type(exc)(f"fetch failed, nothing written to {out_dir}: {exc}{detail}"
                                 ) from exc
            source = "network"
        _publish(staging, out_dir)
    _log(f"{len(cfg.sha256)} files verified from {source} at {cfg.repo}@{cfg.revision[:12]}")
    return source


def run(params: Params, out_dir: Path = RAW_DIR) -> None:
    fetch(params.fetch, out_dir)
