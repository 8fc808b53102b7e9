"""``rimo-eval view``'s arguments (rimo_eval.commands.arguments says why a module of its own)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rimo_eval.commands.arguments import RUN_HELP, add_cutoff

PORT = 8765  # the default of --port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help=f"{RUN_HELP} (default: the workspace)")
    parser.add_argument("--out", type=Path,
                        help="folder of the static site, new or one the view wrote, "
                             "replaced whole (default: reports/view, the view stage's site, "
                             "for the workspace alone; reports/views/A+B for named runs)")
    add_cutoff(parser, "the unseen filter")
    parser.add_argument("--search-reasoning", action="store_true",
                        help="the search covers every reasoning too, not only the problems "
                             "and answers (a reasoning run builds several times slower: "
                             "every word of its reasoning is indexed)")
    parser.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                        help="processes that make the items' files (default: one per CPU, "
                             "at most 8; 1: this process alone). The site is the same "
                             "byte for byte whatever N")
    parser.add_argument("--serve", action="store_true",
                        help="then serve the folder on 127.0.0.1 and print the URL")
    parser.add_argument("--port", type=int, default=PORT, help="port for --serve (0: any)")
    parser.add_argument("--partial", action="store_true",
                        help="a run whose predict is still going (or was killed): show the "
                             "replies already in its response cache, marked partial (one "
                             "RUN; its params.yaml says which requests; nothing is written "
                             "to the cache)")


def _jobs(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs: a whole number of processes >= 1, not "
                                         f"{value!r}")
    return n


__all__ = ["PORT", "add_arguments"]
