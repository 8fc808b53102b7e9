"""``rimo-eval cache stats|prune|verify|migrate``: look after the response cache.

The folder is ``--dir``, else ``predict.openai.cache_dir`` of the params file, else the default
``.rimo_cache/responses`` (relative to the main working tree, as the stages resolve it).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from stages.chat import cache_legacy
from stages.chat.cache import DB_NAME, ResponseCache
from stages.core.chat_params import DEFAULT_RESPONSE_CACHE
from stages.core.errors import StageError
from stages.core.hashing import fingerprint

ACTIONS = ("stats", "prune", "verify", "migrate")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS,
                        help="stats: entries and bytes by model and endpoint; prune: delete "
                             "entries by age, model or endpoint; verify: decode every entry "
                             "and check it; migrate: move a per-file cache of an older "
                             "version into the database")
    parser.add_argument("--dir", help="the cache folder (default: predict.openai.cache_dir)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--older-than", metavar="AGE",
                        help="prune: entries stored before this long ago (90d, 12h, 30m)")
    parser.add_argument("--model", help="prune: entries of this model")
    parser.add_argument("--endpoint", help="prune: entries of this endpoint (base URL)")
    parser.add_argument("--keep-run", metavar="PATH", action="append", type=Path,
                        help="prune: keep the entries these runs' replies came from (a folder "
                             "of predictions or judge tables, or one .parquet file; repeat "
                             "it), delete the rest")
    parser.add_argument("--dry-run", action="store_true",
                        help="prune: say what would be deleted, delete nothing")
    parser.add_argument("--delete-bad", action="store_true",
                        help="verify: delete the entries that fail (they are misses anyway)")


def cache_dir(args: argparse.Namespace, params: Mapping[str, Any] | None) -> str:
    if args.dir:
        return str(args.dir)
    configured = ((params or {}).get("predict") or {}).get("openai") or {}
    folder = configured.get("cache_dir", DEFAULT_RESPONSE_CACHE)
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
    parquet = pq.ParquetFile(file)
    names = parquet.schema_arrow.names
    for column in ("details", "request_sha256"):
        if column in names:
            for batch in parquet.iter_batches(batch_size=512, columns=[column]):
                yield column, batch


def _filters(args: argparse.Namespace, conn: Any = None) -> tuple[str, tuple[Any, ...]]:
    clauses, values = [], []
    if getattr(args, "keep_run", None):
        keys = run_keys(args.keep_run)
        if conn is not None:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS keep (key TEXT PRIMARY KEY)")
            conn.execute("DELETE FROM keep")
            conn.executemany("INSERT OR IGNORE INTO keep VALUES (?)", ((k,) for k in keys))
        clauses.append("key NOT IN (SELECT key FROM temp.keep)")
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
    return "WHERE " + " AND ".join(clauses), tuple(values)


def groups(cache: ResponseCache, where: str = "", values: tuple[Any, ...] = ()
           ) -> list[dict[str, Any]]:
    conn = cache.connection()
    if conn is None:
        return []
    rows = conn.execute("SELECT model, endpoint, count(*), sum(length(data)), sum(size), "
                        f"min(created), max(created) FROM entries {where} "
                        "GROUP BY model, endpoint ORDER BY model, endpoint", values)
    return [{"model": m, "endpoint": e, "entries": n, "stored_bytes": b, "reply_bytes": s,
             "oldest": lo, "newest": hi} for m, e, n, b, s, lo, hi in rows]


def stats(cache: ResponseCache) -> dict[str, Any]:
    assert cache.root is not None
    by = groups(cache)
    files = {name: (cache.root / name).stat().st_size
             for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm")
             if (cache.root / name).exists()}
    legacy = sum(1 for _ in cache.root.glob("??/*.json")) if cache.legacy else 0
    return {"folder": str(cache.root), "entries": sum(g["entries"] for g in by),
            "stored_bytes": sum(g["stored_bytes"] for g in by),
            "reply_bytes": sum(g["reply_bytes"] for g in by),
            "file_bytes": sum(files.values()), "legacy_entries": legacy, "by": by}


def prune(cache: ResponseCache, args: argparse.Namespace) -> dict[str, Any]:
    conn = cache.connection()
    where, values = _filters(args, conn)
    by = groups(cache, where, values)
    result = {"dry_run": bool(args.dry_run), "entries": sum(g["entries"] for g in by),
              "stored_bytes": sum(g["stored_bytes"] for g in by), "by": by}
    if conn is not None and not args.dry_run and by:
        conn.execute(f"DELETE FROM entries {where}", values)
        conn.execute("PRAGMA incremental_vacuum")  # give the freed pages back to the disk
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return result


def verify(cache: ResponseCache, delete_bad: bool) -> dict[str, Any]:
    """Decode every entry and check that it is stored under its request's own key."""
    conn = cache.connection()
    if conn is None:
        return {"entries": 0, "bad": [], "integrity": "ok", "deleted": 0}
    integrity = "; ".join(r[0] for r in conn.execute("PRAGMA quick_check"))
    bad, count = [], 0
    for entry in cache.entries():
        count += 1
        if entry.request is None:
            bad.append({"key": entry.key, "problem": "does not decode (corrupt data)"})
        elif fingerprint(entry.request) != entry.key:
            bad.append({"key": entry.key, "problem": "stored under another request's key"})
    if delete_bad and bad:
        conn.executemany("DELETE FROM entries WHERE key = ?", [(b["key"],) for b in bad])
    return {"entries": count, "bad": bad, "integrity": integrity,
            "deleted": len(bad) if delete_bad else 0}


def _mib(n: int | None) -> str:
    return f"{(n or 0) / 2**20:.1f} MiB"


def _table(by: list[dict[str, Any]]) -> list[str]:
    lines = ["| model | endpoint | entries | stored | replies |",
             "| --- | --- | ---: | ---: | ---: |"]
    lines += [f"| {g['model'] or '-'} | {g['endpoint'] or '-'} | {g['entries']} | "
              f"{_mib(g['stored_bytes'])} | {_mib(g['reply_bytes'])} |" for g in by]
    return lines


def main(args: argparse.Namespace, params: Mapping[str, Any] | None) -> int:
    cache = ResponseCache(cache_dir(args, params))
    try:
        if args.action == "stats":
            out = stats(cache)
            text = [f"{out['folder']}: {out['entries']} entries, {_mib(out['stored_bytes'])} "
                    f"stored ({_mib(out['reply_bytes'])} of JSON), {_mib(out['file_bytes'])} "
                    f"on disk", *_table(out["by"])]
            if out["legacy_entries"]:
                text.append(f"plus {out['legacy_entries']} per-file entries of an older "
                            f"version: `rimo-eval cache migrate` moves them in")
        elif args.action == "prune":
            out = prune(cache, args)
            verb = "would delete" if out["dry_run"] else "deleted"
            text = [f"{verb} {out['entries']} entries ({_mib(out['stored_bytes'])})",
                    *(_table(out["by"]) if out["by"] else [])]
        elif args.action == "verify":
            out = verify(cache, args.delete_bad)
            text = [f"{out['entries']} entries checked, {len(out['bad'])} bad, database "
                    f"check: {out['integrity']}"]
            text += [f"  {b['key']}: {b['problem']}" for b in out["bad"]]
            if out["deleted"]:
                text.append(f"deleted {out['deleted']} bad entries (they are fetched again)")
        else:
            if cache.root is None or not cache.legacy:
                out = {"moved": 0, "already": 0, "dropped": 0, "temporary": 0}
            else:
                out = cache_legacy.migrate(cache)
            text = [f"moved {out['moved']} per-file entries into {DB_NAME} ({out['already']} "
                    f"were there already, {out['dropped']} unreadable ones dropped, "
                    f"{out['temporary']} stale temporary files removed)"]
        print(json.dumps(out, indent=2, sort_keys=True) if args.json else "\n".join(text))
    finally:
        cache.close()
    if args.action == "verify" and ((out["bad"] and not out["deleted"])
                                     or out["integrity"] != "ok"):
        return 1
    return 0
