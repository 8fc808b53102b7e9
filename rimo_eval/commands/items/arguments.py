"""``rimo-eval items``'s arguments (rimo_eval.commands.arguments says why a module of its own)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rimo_eval.run.revision import WORKSPACE

OUT_DIR = Path("reports/items")  # the default of --out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help=f"DVC experiment name, git revision or branch, or '{WORKSPACE}' "
                             f"(at least 3, over the same items at one k)")
    parser.add_argument("--all", action="store_true",
                        help="the largest comparable group of the workspace and its experiments")
    parser.add_argument("--out", default=OUT_DIR.as_posix(),
                        help="folder for items.json, items.md, items.html, items.png and "
                             "suggested_errata.yaml (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the JSON, not the Markdown")
    parser.add_argument("--rows", type=int, default=50, metavar="N",
                        help="flagged items shown in the Markdown (default: %(default)s)")


__all__ = ["OUT_DIR", "add_arguments"]
