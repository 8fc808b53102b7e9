"""``rimo-eval cache stats|prune|verify``: look after the response cache.

The folder is ``--dir``, else ``predict.openai.cache_dir`` of the params file, else the default
``.rimo_cache/responses`` (relative to the main working tree, as the stages resolve it).
Long steps show a progress bar on stderr, as predict does (``TQDM_DISABLE=1`` hides it). A
damaged database is named, with the command that repairs it, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from rimo_eval.artifacts.model_name import gguf_label
from rimo_eval.chat import cache_db, cache_prune, cache_repair
from rimo_eval.chat.cache import DB_NAME, ResponseCache
from rimo_eval.chat.cache_prune import Filter, Tick
from rimo_eval.errors import StageError
from rimo_eval.io.terminal import for_terminal, json_for_terminal
from rimo_eval.params.chat import DEFAULT_RESPONSE_CACHE, OpenAIParams
from rimo_eval.params.config import Params

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def cache_dir(args: argparse.Namespace, params: Params | None) -> str:
    if args.dir:
        return str(args.dir)
    openai = None if params is None else params.predict.backend_config("openai")
    folder = openai.cache_dir if isinstance(openai, OpenAIParams) else DEFAULT_RESPONSE_CACHE
    if folder is None:
        raise StageError("predict.openai.cache_dir is null (no response cache); name one "
                         "with --dir")
    return str(folder)


def parse_age(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if not match:
        raise StageError(f"--older-than {text!r}: give a number and a unit, like 90d, 12h, "
                         f"30m or 45s")
    return float(match.group(1)) * _UNITS[match.group(2)]


_SHA = re.compile(r'"(?:failed_)?request_sha256":"([0-9a-f]{64})"')


def run_keys(paths: list[Path]) -> set[str]:
    """The cache keys the replies of these runs came from: every ``request_sha256`` in the
    ``details`` of predictions tables (RIMO-P parts included) and in judge tables, read a
    batch at a time (a k = 64 table's details do not fit in memory at once)."""
    keys: set[str] = set()
    for path in paths:
        files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
        if not files or not all(f.is_file() for f in files):
            raise StageError(f"--keep-run {path}: no predictions or judge tables there")
        for file in files:
            for column, batch in _columns(file):
                values = batch.column(0).to_pylist()
                if column == "request_sha256":
                    keys.update(v for v in values if v)
                else:
                    keys.update(k for v in values if v for k in _SHA.findall(v))
    return keys


def _columns(file: Path) -> Iterator[tuple[str, Any]]:
    import pyarrow.parquet as pq  # here: 0.3 s of every cache command's start otherwise

    parquet = pq.ParquetFile(file)
    names = parquet.schema_arrow.names
    for column in ("details", "request_sha256"):
        if column in names:
            for batch in parquet.iter_batches(batch_size=512, columns=[column]):
                yield column, batch


def _filters(args: argparse.Namespace, conn: Any = None) -> Filter:
    clauses, values = [], []
    uses_key = False
    if getattr(args, "keep_run", None):
        keys = run_keys(args.keep_run)
        if conn is not None:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS keep (key TEXT PRIMARY KEY)")
            conn.execute("DELETE FROM keep")
            conn.executemany("INSERT OR IGNORE INTO keep VALUES (?)", ((k,) for k in keys))
        clauses.append("key NOT IN (SELECT key FROM temp.keep)")
        uses_key = True
    if args.older_than:
        clauses.append("created < ?")
        values.append(time.time() - parse_age(args.older_than))
    for column in ("model", "endpoint"):
        if getattr(args, column) is not None:
            clauses.append(f"{column} = ?")
            values.append(getattr(args, column))
    if not clauses:
        raise StageError("cache prune: name what to delete with --older-than, --model, "
                         "--endpoint or --keep-run (or delete the folder to drop everything)")
    return Filter(clauses, tuple(values), uses_key)


class Bars:
    """One progress bar per step of a long command, on stderr like predict's."""

    def __init__(self) -> None:
        self.bar: Any = None

    def __call__(self, label: str, total: int | None) -> Tick:
        self.close()
        self.bar = tqdm(total=total, desc=f"cache: {label}", file=sys.stderr,
                        dynamic_ncols=True, mininterval=0.5, leave=False)
        tick: Tick = self.bar.update
        return tick

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _upgraded(cache: ResponseCache, conn: Any, progress: cache_prune.Progress) -> None:
    """Tallies for a database of an older version (once, said on stderr)."""
    if not cache_db.has_tallies(conn):
        _writable(cache, "and was made by an older rimo-eval: its entries must be counted "
                         "once")
        print(for_terminal(f"rimo-eval cache: counting the entries of {cache.db_path} once "
                           "(a cache made by an older rimo-eval)"), file=sys.stderr)
        cache_db.add_tallies(conn, progress("counting entries once", None))


def _writable(cache: ResponseCache, doing: str) -> None:
    """A read-only cache (``stats`` opens one so) cannot do what needs a write."""
    if cache.readonly:
        raise cache_db.read_only_error(cache.db_path, cache_db.read_only(cache.db_path)
                                       or "opened read-only", doing)


def groups(conn: Any) -> list[dict[str, Any]]:
    """Entries, bytes and age per (model, endpoint): from the tallies and the label index,
    not from the entries (a few rows, whatever the size)."""
    rows = conn.execute(
        "SELECT t.model, t.endpoint, t.entries, t.stored, t.size, "
        "(SELECT min(created) FROM entries e WHERE e.model = t.model AND "
        "e.endpoint = t.endpoint), (SELECT max(created) FROM entries e WHERE "
        "e.model = t.model AND e.endpoint = t.endpoint) FROM tallies t WHERE t.entries > 0 "
        "ORDER BY t.model, t.endpoint")
    return [{"model": m, "endpoint": e, "entries": n, "stored_bytes": b, "reply_bytes": s,
             "oldest": lo, "newest": hi} for m, e, n, b, s, lo, hi in rows]


def _files(cache: ResponseCache) -> dict[str, int]:
    assert cache.root is not None
    return {name: (cache.root / name).stat().st_size
            for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm")
            if (cache.root / name).exists()}


def _no_known_damage(cache: ResponseCache) -> None:
    earlier = cache_db.noted(cache.db_path)
    if earlier is not None:
        raise cache_db.damaged(cache.db_path, earlier, note=False)


def stats(cache: ResponseCache, progress: cache_prune.Progress = cache_prune.quiet
          ) -> dict[str, Any]:
    assert cache.root is not None
    _no_known_damage(cache)
    conn = cache.connection()
    by: list[dict[str, Any]] = []
    free = 0
    if conn is not None:
        with cache.guard():
            cache_db.for_maintenance(conn)
            _upgraded(cache, conn, progress)
            by = groups(conn)
            # The tallies against a count of the smallest index (tens of ms at a million):
            # REPLACE by a connection without recursive triggers leaves them off by one.
            if sum(g["entries"] for g in by) != conn.execute(
                    "SELECT count(*) FROM entries").fetchone()[0]:
                _writable(cache, "and its tallies must be recounted")
                cache_db.recount(conn, progress("recounting entries", None))
                by = groups(conn)
            free = (conn.execute("PRAGMA freelist_count").fetchone()[0]
                    * conn.execute("PRAGMA page_size").fetchone()[0])
    files = _files(cache)
    return {"folder": str(cache.root), "entries": sum(g["entries"] for g in by),
            "stored_bytes": sum(g["stored_bytes"] for g in by),
            "reply_bytes": sum(g["reply_bytes"] for g in by),
            "file_bytes": sum(files.values()), "free_bytes": free,
            "by": by}


def prune(cache: ResponseCache, args: argparse.Namespace,
          progress: cache_prune.Progress = cache_prune.quiet) -> dict[str, Any]:
    if cache.root is not None:
        _no_known_damage(cache)
    conn = cache.connection()
    where = _filters(args, conn)
    result: dict[str, Any] = {"dry_run": bool(args.dry_run), "entries": 0, "stored_bytes": 0,
                              "by": []}
    if conn is None:
        return result
    before = sum(_files(cache).values())
    with cache.guard():
        cache_db.for_maintenance(conn)
        _upgraded(cache, conn, progress)
        rowids = cache_prune.doomed(conn, where, progress)
        if args.dry_run:
            out = cache_prune.measure(conn, rowids, where, progress)
        else:
            out = cache_prune.delete(conn, rowids, where, progress)
            result.update(file_bytes_before=before, file_bytes=sum(_files(cache).values()),
                          vacuum=out.vacuum)
    result.update(entries=out.entries, stored_bytes=out.stored_bytes, by=out.groups())
    return result


def _mib(n: int | None) -> str:
    return f"{(n or 0) / 2**20:.1f} MiB"


def _table(by: list[dict[str, Any]]) -> list[str]:
    lines = ["| model | endpoint | entries | stored | replies |",
             "| --- | --- | ---: | ---: | ---: |"]
    lines += [f"| {gguf_label(g['model']) or '-'} | {g['endpoint'] or '-'} | {g['entries']} | "
              f"{_mib(g['stored_bytes'])} | {_mib(g['reply_bytes'])} |" for g in by]
    return lines


def main(args: argparse.Namespace, params: Params | None) -> int:
    folder = cache_dir(args, params)
    # stats only reads: a read-only cache is read so (prune says it is read-only, verify
    # checks it read-only itself).
    readonly = args.action == "stats" and cache_db.read_only(
        ResponseCache(folder).db_path) is not None
    cache = ResponseCache(folder, readonly=readonly)
    bars = Bars()
    try:
        if args.action == "stats":
            out = stats(cache, bars)
            text = [f"{out['folder']}: {out['entries']} entries, {_mib(out['stored_bytes'])} "
                    f"stored ({_mib(out['reply_bytes'])} of JSON), {_mib(out['file_bytes'])} "
                    f"on disk ({_mib(out['free_bytes'])} free)", *_table(out["by"])]
        elif args.action == "prune":
            out = prune(cache, args, bars)
            verb = "would delete" if out["dry_run"] else "deleted"
            text = [f"{verb} {out['entries']} entries ({_mib(out['stored_bytes'])})",
                    *(_table(out["by"]) if out["by"] else [])]
            if "file_bytes" in out:
                text.append(f"the files went from {_mib(out['file_bytes_before'])} to "
                            f"{_mib(out['file_bytes'])} (space given back: {out['vacuum']})")
        else:
            assert cache.root is not None
            cache.close()
            out, text = _verify(cache, args, bars)
        bars.close()
        print(json_for_terminal(json.dumps(out, indent=2, sort_keys=True)) if args.json
              else for_terminal("\n".join(text)))
    finally:
        bars.close()
        cache.close()
    if args.action == "verify" and "recovered" not in out and (
            (out["bad"] and not out["deleted"]) or out["damaged"]):
        return 1
    return 0


def _verify(cache: ResponseCache, args: argparse.Namespace, bars: Bars
            ) -> tuple[dict[str, Any], list[str]]:
    db = cache.db_path
    if args.recover:
        out = cache_repair.recover(db, bars)
        lost = "an unknown number" if out["lost"] is None else str(out["lost"])
        expected = "" if out["expected"] is None else f" of {out['expected']}"
        text = [f"recovered {out['recovered']}{expected} entries into a new {DB_NAME}; "
                f"{lost} lost ({out['dropped_bad']} bad entries dropped, "
                f"{out['unreadable_rowids'] or 0} rows on unreadable pages)"]
        if out["set_aside"]:
            text.append(f"the damaged file is kept at {out['set_aside']} (delete it when "
                        f"you no longer need it)")
        return out, text
    out = cache_repair.verify(db, args.delete_bad, bars)
    text = [f"{out['entries']} entries checked, {len(out['bad'])} bad, database check: "
            f"{out['integrity']}"]
    if out.get("read_only"):
        text.append(f"checked read-only ({out['read_only']}): nothing was written"
                    + (f"; {out['unread_wal']}" if out.get("unread_wal") else ""))
    text += [f"  {b['key']}: {b['problem']}" for b in out["bad"]]
    if out["deleted"]:
        text.append(f"deleted {out['deleted']} bad entries (they are fetched again)")
    if out["damaged"]:
        unreadable = "" if out["unreadable"] is None else (
            f"; {out['unreadable']} rows on pages that do not read")
        text.append(f"the database is damaged{unreadable}: "
                    f"{cache_db.repair_hint(db.parent)} to copy every readable entry into "
                    f"a new database and set the damaged file aside")
    return out, text
