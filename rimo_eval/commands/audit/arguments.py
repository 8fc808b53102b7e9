"""``rimo-eval audit``'s arguments (rimo_eval.commands.arguments says why a module of its own)."""

from __future__ import annotations

import argparse

from rimo_eval.commands.arguments import RUN_HELP, WORKSPACE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", metavar="NAME", default=WORKSPACE,
                        help=f"{RUN_HELP} (default), as compare takes them")
    parser.add_argument("--json", action="store_true", help="machine-readable report on stdout")


__all__ = ["add_arguments"]
