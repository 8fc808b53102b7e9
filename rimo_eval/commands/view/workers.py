"""The item files, made in worker processes: a k = 64 reasoning run is 3.2 GB of text to read,
compress and index for search, and one process does it on one core.

The items are cut in blocks of consecutive items; each worker (a fork of this process, which
holds the runs' tables) takes the next block, reads its texts through cursors of its own
(texts.py: it skips the row groups before the block), writes each item's file and sends back
the items' grid entries and search words, which are taken in index order. Each item's file
depends on that item alone, so the site is byte for byte the one a single process writes
(tests/unit/test_view_workers.py builds it both ways). A worker that dies (killed, out of
memory) fails the build with an error, never a hang (concurrent.futures, not
multiprocessing.Pool, whose lost tasks are waited for forever).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pyarrow
from tqdm import tqdm

from rimo_eval.commands.view.model import Site
from rimo_eval.commands.view.site import write_item, write_items_here
from rimo_eval.errors import StageError

BLOCK = 16  # items a worker takes at once: small enough that none is left alone at the end
MAX_JOBS = 8

_site: Site | None = None  # the worker's own, set once forked
_tmp: Path | None = None


def default_jobs() -> int:
    """The CPUs this process may use, at most MAX_JOBS."""
    return max(1, min(MAX_JOBS, len(os.sched_getaffinity(0))))


def write_items(site: Site, tmp: Path, jobs: int | None = None) -> dict[str, int]:
    """Write every item's file under ``tmp``, ``jobs`` processes at once (default: one per
    CPU); fill ``site.index_items`` and ``site.words``. Returns how many items were written
    (``items``) and by how many processes (``jobs``: 1 where the runs' tables cannot be
    reopened by a worker, e.g. read from memory)."""
    jobs = default_jobs() if jobs is None else jobs
    blocks = [(a, min(a + BLOCK, site.count)) for a in range(0, site.count, BLOCK)]
    if (jobs <= 1 or len(blocks) <= 1 or not site.reopenable()
            or "fork" not in multiprocessing.get_all_start_methods()):
        with _bar(site.count, site.payloads()) as payloads:
            return {"items": write_items_here(tmp, payloads), "jobs": 1}
    with _bar(site.count) as bar:
        site.index_items, site.words = [], []
        jobs = min(jobs, len(blocks))
        # What Arrow's allocator kept from reading the tables goes back to the system before
        # the fork, not into every worker's pages (180 MiB of a k = 64 run's 600).
        pyarrow.default_memory_pool().release_unused()
        # fork: the workers share the tables this process read (nothing is pickled but the
        # block numbers and the entries sent back).
        with ProcessPoolExecutor(jobs, multiprocessing.get_context("fork"), _start,
                                 (site, tmp)) as pool:
            try:
                for made in pool.map(_block, blocks):
                    site.collect(made)
                    bar.update(len(made))
            except BrokenProcessPool as exc:
                raise StageError(f"view: a worker process making the site's items died "
                                 f"({exc}); was it out of memory? `--jobs 1` makes them in "
                                 f"this process alone") from None
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise
        return {"items": site.count, "jobs": jobs}


def _bar(total: int, items: Iterator[dict[str, Any]] | None = None) -> Any:
    """A progress bar over the items, on a terminal only (a k = 64 reasoning run takes half a
    minute or more); iterating it gives ``items``."""
    return tqdm(items, total=total, unit="item", desc="view", file=sys.stderr, disable=None,
                dynamic_ncols=True, mininterval=0.5, leave=False)


def _start(site: Site, tmp: Path) -> None:
    global _site, _tmp
    site.reopen()
    _site, _tmp = site, tmp


def _block(block: tuple[int, int]) -> list[tuple[dict[str, Any], str]]:
    assert _site is not None and _tmp is not None
    out = []
    for n in range(*block):
        payload, entry, words = _site.made(n)
        write_item(_tmp, n, payload)
        out.append((entry, words))
    return out


__all__ = ["BLOCK", "default_jobs", "write_items"]
