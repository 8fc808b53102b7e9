"""``view`` makes its items in worker processes (workers.py): the same site, byte for byte, as
one process makes, each worker reading its own blocks of a table laid out as predict writes it
(texts in their own columns, items straddling row groups)."""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.commands.view import workers
from rimo_eval.commands.view.arguments import add_arguments
from rimo_eval.commands.view.model import Site
from rimo_eval.commands.view.site import write_with
from rimo_eval.commands.view.texts import DetailsCursor
from rimo_eval.commands.view.workers import write_items
from rimo_eval.errors import StageError
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import n_item, p_item
from tests.support.factories import write_items as write_item_tables
from tests.support.view_runs import HOSTILE_TEXT, small_run

N, P, K = 23, 9, 3


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("workers")
    items = root / "items"
    write_item_tables(items, [n_item(f"2001n{i:02d}", str(i)) for i in range(N)],
                      [p_item(f"2001p{i:02d}", ["a", "b"]) for i in range(P)])
    rows = [{"track": TRACK_N, "problem_id": f"2001n{i:02d}", "sample": j,
             "prediction": str(i if j else i + 1)} for i in range(N) for j in range(K)]
    rows += [{"track": TRACK_P, "problem_id": f"2001p{i:02d}", "sample": j,
              "prediction": ["a", f"b {i} {j}"]} for i in range(P) for j in range(K)]
    details = {(TRACK_N, f"2001n{i:02d}", j): {
        "text": f"item {i} sample {j}: $x^{i}$ " + (HOSTILE_TEXT if i % 5 == 0 else ""),
        "reasoning": f"reasoning {i}/{j} " * (50 + i), "finish_reason": "stop"}
        for i in range(N) for j in range(K)}
    details |= {(TRACK_P, f"2001p{i:02d}", j): {"parts": [
        {"reasoning": f"part one of {i}/{j}"}, {"reasoning": f"part two of {i}/{j}"}]}
        for i in range(P) for j in range(K)}
    made = small_run(root, "k3", items, rows, K, details, row_group_rows=4)
    for track in (TRACK_N, TRACK_P):  # items straddle row groups, as in a predict's table
        assert pq.ParquetFile(predictions_path(track, root / "k3/preds")) \
            .metadata.num_row_groups > 4
    return made


def build(run: Any, out: Path, jobs: int) -> tuple[dict[str, int], dict[str, str]]:
    site = Site([run])
    counts = write_with(out, lambda tmp: write_items(site, tmp, jobs),
                        lambda: (site.index(), site.words))
    return counts, {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                    for p in sorted(out.rglob("*")) if p.is_file()}


def test_workers_write_the_site_one_process_writes(run: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "BLOCK", 3)  # 11 blocks: each worker takes several
    one, alone = build(run, tmp_path / "one", 1)
    two, split = build(run, tmp_path / "two", 2)
    assert (one["jobs"], two["jobs"]) == (1, 2)  # the workers did make it
    assert one["items"] == two["items"] == N + P
    assert split == alone
    assert len([f for f in alone if f.startswith("data/items/")]) == N + P


def spied_cursor(run: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[DetailsCursor, list[int]]:
    """A fresh RIMO-N cursor of ``run`` and the row groups it decodes, in order, as it reads."""
    cursor = run.cursors[TRACK_N].reopened()
    read: list[int] = []
    real = cursor._file.read_row_group

    def spy(group: int, **kwargs: Any) -> Any:
        read.append(group)
        return real(group, **kwargs)

    monkeypatch.setattr(cursor._file, "read_row_group", spy)
    return cursor, read


def test_a_worker_skips_the_row_groups_before_its_block(run: Any,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """A cursor asked first for an item deep in the table reads from the row group that
    holds it, not every group before (the file's problem-id statistics)."""
    cursor, read = spied_cursor(run, monkeypatch)
    last = f"2001n{N - 1:02d}"
    assert cursor.get(last, K - 1)["reasoning"] == f"reasoning {N - 1}/{K - 1} " * (50 + N - 1)
    groups = cursor._file.metadata.num_row_groups
    assert read == [groups - 2, groups - 1] or read == [groups - 1], (read, groups)
    # And back to the first item: read again from the start, as before.
    assert cursor.get("2001n00", 0)["reasoning"].startswith("reasoning 0/0 ")
    cursor.close()


def test_an_item_ending_with_its_row_group_does_not_read_the_next(
        run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The item whose rows end where their row group does is complete by the statistics: the
    next group (the next block's, read by another worker) is not decoded for it."""
    cursor, read = spied_cursor(run, monkeypatch)
    # Four rows a group, three samples an item: item 3's rows are 9-11, group 2's last three.
    assert [cursor.get("2001n03", j)["reasoning"] for j in range(K)] == [
        f"reasoning 3/{j} " * 53 for j in range(K)]
    assert read == [2]
    # The item after it then reads on from there, and straddles groups 3 and 4.
    assert cursor.get("2001n05", K - 1)["reasoning"] == f"reasoning 5/{K - 1} " * 55
    assert read == [2, 3, 4]
    cursor.close()


def test_a_table_without_a_path_is_made_in_one_process(run: Any, tmp_path: Path) -> None:
    """A table held in memory cannot be reopened by a worker: one process makes the site."""
    path = predictions_path(TRACK_N, Path(run.cursors[TRACK_N].path()).parents[1] / "preds")
    assert DetailsCursor(str(path), TRACK_N).path() == str(path)
    memory = DetailsCursor(pa.BufferReader(path.read_bytes()), TRACK_N)
    assert memory.path() is None
    real = run.cursors[TRACK_N]
    run.cursors[TRACK_N] = memory
    try:
        counts, _ = build(run, tmp_path / "memory", 2)
    finally:
        run.cursors[TRACK_N] = real
    assert (counts["jobs"], counts["items"]) == (1, N + P)


REAL_BLOCK = workers._block


def dies_on_the_third_block(block: tuple[int, int]) -> Any:
    """A worker killed mid-build (out of memory, say): it exits without a word."""
    if block[0] >= 6:
        os._exit(9)
    return REAL_BLOCK(block)


def test_a_worker_that_dies_fails_the_build_and_leaves_nothing(
        run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """multiprocessing.Pool waits forever for a dead worker's task; the build must fail with
    an error instead, and leave no half-written site."""
    monkeypatch.setattr(workers, "BLOCK", 3)
    monkeypatch.setattr(workers, "_block", dies_on_the_third_block)

    def hung(*_: Any) -> None:
        raise TimeoutError("the build hung on a dead worker")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with pytest.raises(StageError, match="a worker process making the site's items died"):
            build(run, tmp_path / "dead", 2)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert not (tmp_path / "dead").exists() and not list(tmp_path.glob(".dead.*"))


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_jobs_must_be_a_whole_number_of_processes(value: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="rimo-eval view")
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--jobs", value])
    assert "--jobs: a whole number of processes >= 1" in capsys.readouterr().err
    assert parser.parse_args(["--jobs", "3"]).jobs == 3
