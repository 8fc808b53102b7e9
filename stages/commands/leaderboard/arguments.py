"""The command line of ``rimo-eval leaderboard``; light to import (cli.py builds every parser)."""

from __future__ import annotations

import argparse

OUT_DIR = "reports/leaderboard"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="DVC experiment names, git revisions or branches, or 'workspace'")
    parser.add_argument("--all", action="store_true",
                        help="every DVC experiment of the workspace's baseline, and the workspace")
    parser.add_argument("--out", default=OUT_DIR,
                        help="output folder (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the JSON instead of Markdown")
    parser.add_argument("--label", choices=("exp", "model"), default="exp",
                        help="name rows by experiment (default) or by model")
    parser.add_argument("--sort", metavar="METRIC",
                        help="metric to rank by (default RIMO-N.accuracy; at k > 1 "
                             "RIMO-N.mean_at_k.accuracy)")
    parser.add_argument("--samples", type=int,
                        help="bootstrap resamples (default: score.bootstrap, or 1000)")
    parser.add_argument("--seed", type=int, help="bootstrap seed (default: score.bootstrap, or 0)")
    parser.add_argument("--confidence", type=float,
                        help="interval level (default: score.bootstrap, or 0.95)")


__all__ = ["OUT_DIR", "add_arguments"]
