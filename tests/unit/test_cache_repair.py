"""A damaged response cache (issue 30 §3), with a real page of the file overwritten: ``verify``
reports it and ``--recover`` rebuilds the database from every readable entry; ``stats`` and
predict name it with the command that repairs it; nothing crashes with a traceback."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from rimo_eval.chat.cache import DB_NAME, ResponseCache, request_key
from rimo_eval.chat.cache_db import DamagedCache, note_path
from rimo_eval.cli import main
from tests.support.cache_tools import noisy, overwrite_page, pages_of, payload
from tests.support.chat_server import ChatServer
from tests.support.factories import n_item, write_items
from tests.support.paths import REPO_ROOT
from tests.support.predict_faults import KEY_ENV, openai_config, predict_cfg

N = 120


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    cache = ResponseCache(folder)
    for i in range(N):
        cache.put(request_key(payload(i)), payload(i), noisy(i))
    cache.close()  # the last connection folds the WAL into the file
    assert {p.name for p in folder.iterdir()} == {DB_NAME}
    return folder


def damage(root: Path, table: str) -> int:
    """Overwrite a page of ``table`` (a leaf in the middle) with random bytes; its number."""
    leaves = pages_of(root / DB_NAME, table, "leaf")
    page = leaves[len(leaves) // 2]
    overwrite_page(root / DB_NAME, page, random.Random(page).randbytes(4096))
    return page


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["cache", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_verify_reports_a_damaged_page_and_recover_keeps_every_readable_entry(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    damage(root, "entries")
    code, out, err = cli(capsys, "verify", "--dir", str(root), "--json")
    report = json.loads(out)
    assert code == 1 and report["damaged"] and report["integrity"] != "ok"
    assert report["unreadable"] > 0 and report["entries"] < N and report["expected"] == N
    assert "Traceback" not in err
    code, out, _ = cli(capsys, "verify", "--dir", str(root))
    assert code == 1 and f"verify --recover --dir {root}" in out
    # stats reads a few pages, not this one: it names the damage verify noted.
    code, _, err = cli(capsys, "stats", "--dir", str(root))
    assert code == 1 and "damaged" in err and "verify --recover" in err
    assert "Traceback" not in err

    code, out, err = cli(capsys, "verify", "--dir", str(root), "--recover", "--json")
    got = json.loads(out)
    assert code == 0 and "Traceback" not in err
    assert got["expected"] == N and 0 < got["lost"] < 10 and got["recovered"] == N - got["lost"]
    aside = Path(got["set_aside"])
    assert aside.name.startswith(f"{DB_NAME}.damaged-") and aside.exists()
    assert not note_path(root / DB_NAME).exists()
    # The new database: healthy, every recovered entry served, the lost ones misses.
    code, out, _ = cli(capsys, "verify", "--dir", str(root), "--json")
    assert code == 0 and json.loads(out)["entries"] == got["recovered"]
    cache = ResponseCache(root)
    served = [cache.get(request_key(payload(i)), payload(i)) == noisy(i) for i in range(N)]
    assert sum(served) == got["recovered"]
    assert cli(capsys, "stats", "--dir", str(root), "--json")[0] == 0


def test_a_damaged_index_page_loses_no_entry(root: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    damage(root, "sqlite_autoindex_entries_1")  # the key index: rows still read by rowid
    code, out, _ = cli(capsys, "verify", "--dir", str(root), "--json")
    assert code == 1 and json.loads(out)["damaged"]
    code, out, _ = cli(capsys, "verify", "--dir", str(root), "--recover", "--json")
    got = json.loads(out)
    assert code == 0 and got["recovered"] == N and got["lost"] == 0
    cache = ResponseCache(root)
    assert all(cache.get(request_key(payload(i)), payload(i)) == noisy(i) for i in range(N))


def test_a_lookup_on_a_damaged_page_stops_with_the_repair_command(root: Path) -> None:
    damage(root, "entries")
    cache = ResponseCache(root)
    with pytest.raises(DamagedCache, match="verify --recover"):
        for i in range(N):  # one of them sits on the damaged page
            cache.get(request_key(payload(i)), payload(i))
    assert note_path(root / DB_NAME).exists()


def test_a_damaged_header_is_named_at_open(root: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    overwrite_page(root / DB_NAME, 1, b"\x00" * 100)  # the file header
    with pytest.raises(DamagedCache, match="verify --recover"):
        ResponseCache(root).get(request_key(payload(1)), payload(1))
    code, _, err = cli(capsys, "stats", "--dir", str(root))
    assert code == 1 and "damaged" in err and "Traceback" not in err
    code, out, err = cli(capsys, "verify", "--dir", str(root), "--recover", "--json")
    got = json.loads(out)
    assert code == 0 and got["recovered"] == 0 and got["set_aside"]
    assert len(ResponseCache(root)) == 0  # an empty, working cache in its place
    assert Path(got["set_aside"]).stat().st_size > 4096  # the old file, kept for inspection


@pytest.mark.chat_server(latency_s=0.0)
def test_predict_stops_at_a_damaged_page_sending_nothing(
        server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The choice of issue 30 §3: predict stops with the repair command, no traceback, before
    sending anything (it used to treat the lookup as a miss, pay again, crash on the write)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(KEY_ENV, raising=False)
    write_items(tmp_path / "data" / "items",
                [n_item(f"n{i:03d}", str(i)) for i in range(150)], [])
    full = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    full["predict"] = predict_cfg(openai_config(server, tmp_path / "cache"))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(full))
    assert main(["--params", "params.yaml", "predict"]) == 0
    sent = len(server.records)
    damage(tmp_path / "cache", "entries")
    capsys.readouterr()
    assert main(["--params", "params.yaml", "predict"]) == 1
    err = capsys.readouterr().err
    assert "response cache is damaged" in err and "verify --recover" in err
    assert "Traceback" not in err
    assert len(server.records) == sent  # nothing sent for it, nothing sent at all
