"""``rimo-eval compare``'s arguments (rimo_eval.commands.arguments says why a module of its
own)."""

from __future__ import annotations

import argparse

from rimo_eval.commands.arguments import RUN_HELP, add_bootstrap

FLIPS = 20  # flips listed per track unless --all-flips (or --flips N); JSON holds them all


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for side in ("a", "b"):
        parser.add_argument(side, metavar=side.upper(), help=RUN_HELP)
    parser.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    parser.add_argument("--html", metavar="PATH",
                        help="also write a self-contained HTML report (a new file or one "
                             "compare wrote)")
    parser.add_argument("--flips", type=int, metavar="N", help=f"flips listed per track ({FLIPS})")
    parser.add_argument("--all-flips", action="store_true", help="list every flipped item")
    parser.add_argument("--strict", action="store_true",
                        help="refuse two runs over different items (default: compare on the "
                             "items both have, and say so first)")
    add_bootstrap(parser, ("paired bootstrap resamples (default: score.bootstrap, or 1000)",
                           "bootstrap seed (default: score.bootstrap, or 0)",
                           "bootstrap interval level (default: score.bootstrap, or 0.95)"))


__all__ = ["FLIPS", "add_arguments"]
