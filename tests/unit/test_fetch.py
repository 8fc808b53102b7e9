"""Stage fetch against the real mirror and a real loopback HTTP server."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from rimo_eval.errors import StageError
from rimo_eval.fetch import fetch
from rimo_eval.io.hashing import sha256_file
from rimo_eval.params.config import FetchParams, load_params
from tests.support.http_files import serve_directory
from tests.support.paths import REPO_ROOT, UPSTREAM_FILES


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(mirrors: list[Path], url_template: str | None = None) -> FetchParams:
    cfg = load_params(REPO_ROOT / "params.yaml").fetch.as_dict()
    cfg["mirrors"] = [str(m) for m in mirrors]
    cfg["url_template"] = url_template or f"http://127.0.0.1:{_closed_port()}/{{file}}"
    cfg["timeout_s"] = 5
    return FetchParams.model_validate(cfg)


def test_pinned_hashes_match_the_mirror_sums(mirror_dir: Path) -> None:
    sums = dict(reversed(line.split()) for line in
                (mirror_dir / "SHA256SUMS").read_text().splitlines())
    assert config([]).sha256 == sums


def test_fetch_from_mirror_copies_verified_files(tmp_path: Path, mirror_dir: Path) -> None:
    out = tmp_path / "data" / "raw"
    source = fetch(config([tmp_path / "absent", mirror_dir]), out)
    assert source == str(mirror_dir)
    assert sorted(p.name for p in out.iterdir()) == sorted(UPSTREAM_FILES)
    for name in UPSTREAM_FILES:
        assert sha256_file(out / name) == sha256_file(mirror_dir / name)


def test_corrupted_mirror_and_no_network_fails_writing_nothing(tmp_path: Path,
                                                               raw_dir: Path) -> None:
    (raw_dir / "RIMO-P.csv").write_bytes((raw_dir / "RIMO-P.csv").read_bytes()[:-10])
    actual = sha256_file(raw_dir / "RIMO-P.csv")
    out = tmp_path / "data" / "raw"
    cfg = config([raw_dir])
    with pytest.raises(StageError) as err:
        fetch(cfg, out)
    msg = str(err.value)
    assert "RIMO-P.csv" in msg
    assert cfg.sha256["RIMO-P.csv"] in msg and actual in msg
    assert "download failed" in msg
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir()] == []  # no staging folder left behind


def test_failure_keeps_previous_raw_intact(tmp_path: Path, mirror_dir: Path,
                                           raw_dir: Path) -> None:
    out = tmp_path / "data" / "raw"
    fetch(config([mirror_dir]), out)
    before = {p.name: sha256_file(p) for p in out.iterdir()}
    (raw_dir / "RIMO-N.jsonl").write_text("{}\n")
    with pytest.raises(StageError):
        fetch(config([raw_dir]), out)
    assert {p.name: sha256_file(p) for p in out.iterdir()} == before


def test_network_download_verifies_hashes(tmp_path: Path, mirror_dir: Path) -> None:
    site = tmp_path / "site" / "ziye2chen" / "RIMO" / "REV" / "RIMO"
    site.mkdir(parents=True)
    for name in UPSTREAM_FILES:
        shutil.copyfile(mirror_dir / name, site / name)
    out = tmp_path / "data" / "raw"
    with serve_directory(tmp_path / "site") as base:
        template = base + "/{repo}/REV/{folder}/{file}"
        assert fetch(config([], template), out) == "network"
    for name in UPSTREAM_FILES:
        assert sha256_file(out / name) == sha256_file(mirror_dir / name)


def test_network_hash_mismatch_names_file_and_hashes(tmp_path: Path, raw_dir: Path) -> None:
    (raw_dir / "RIMO-N.csv").write_bytes(b"problem_id\n")
    out = tmp_path / "data" / "raw"
    with serve_directory(raw_dir) as base:
        cfg = config([], base + "/{file}")
        with pytest.raises(StageError) as err:
            fetch(cfg, out)
    msg = str(err.value)
    assert "RIMO-N.csv" in msg and cfg.sha256["RIMO-N.csv"] in msg
    assert sha256_file(raw_dir / "RIMO-N.csv") in msg
    assert not out.exists()


def test_swap_killed_between_renames_is_undone(tmp_path: Path, mirror_dir: Path,
                                               raw_dir: Path) -> None:
    out = tmp_path / "data" / "raw"
    fetch(config([mirror_dir]), out)
    before = {p.name: sha256_file(p) for p in out.iterdir()}
    out.rename(out.with_name(".raw.old"))  # where a kill after the first rename leaves it
    (raw_dir / "RIMO-N.jsonl").write_text("{}\n")
    with pytest.raises(StageError):
        fetch(config([raw_dir]), out)
    assert {p.name: sha256_file(p) for p in out.iterdir()} == before
