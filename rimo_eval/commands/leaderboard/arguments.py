"""``rimo-eval leaderboard``'s arguments (rimo_eval.commands.arguments says why a module of its
own)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rimo_eval.commands.arguments import WORKSPACE, add_bootstrap, add_cutoff

OUT_DIR = Path("reports/leaderboard")  # the default of --out
LABELS = ("exp", "model")  # --label: rows named by experiment (the default) or by model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help=f"DVC experiment name, git revision or branch, or '{WORKSPACE}'")
    parser.add_argument("--all", action="store_true",
                        help="the workspace and every DVC experiment of its baseline")
    parser.add_argument("--out", default=OUT_DIR.as_posix(),
                        help="folder, new or one the leaderboard wrote, replaced whole "
                             "(default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the JSON, not the Markdown")
    parser.add_argument("--label", choices=LABELS, default=LABELS[0],
                        help="name rows by experiment (default) or by model")
    parser.add_argument("--sort", metavar="METRIC", help="metric to rank by (default "
                        "RIMO-N.accuracy; RIMO-N.mean_at_k.accuracy at k > 1)")
    add_bootstrap(parser, ("rank bootstrap (default: score.bootstrap)",) * 3)
    add_cutoff(parser, "its unseen subset")


__all__ = ["LABELS", "OUT_DIR", "add_arguments"]
