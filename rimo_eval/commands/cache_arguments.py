"""``rimo-eval cache``'s arguments (rimo_eval.commands.arguments says why a module of its own:
the parser is built for every command, so the cache code is imported only when the cache runs).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ACTIONS = ("stats", "prune", "verify")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS,
                        help="stats: entries and bytes by model and endpoint; prune: delete "
                             "entries by age, model or endpoint; verify: decode every entry "
                             "and check it (--recover: rebuild a damaged one)")
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
    parser.add_argument("--recover", action="store_true",
                        help="verify: copy every readable entry of a damaged database into a "
                             "new one, set the damaged file aside, say how many were lost")


__all__ = ["ACTIONS", "add_arguments"]
