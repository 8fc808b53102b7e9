"""``rimo-eval plan``'s arguments: a light module, as the parser is built for every command."""

from __future__ import annotations

import argparse

DISCORDANCE = 0.2  # an assumption, stated in the output; compare measures a pair's own
RHO = 0.5
ALPHA = 0.05  # rimo_eval.stats.power's defaults
POWER = 0.8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--items", type=int, help="RIMO-N items (default: predict.limit, else "
                                                  "every item)")
    parser.add_argument("--samples", type=int, help="samples per item, k (default: "
                                                    "predict.samples)")
    parser.add_argument("--discordance", type=float, default=DISCORDANCE,
                        help="assumed share of items one run gets right and the other wrong "
                             "(default: %(default)s; `rimo-eval compare` measures it: right in "
                             "A only + right in B only, over the paired items)")
    parser.add_argument("--rho", type=float, default=RHO,
                        help="k > 1: assumed correlation of one item's per-sample differences "
                             "(default: %(default)s)")
    parser.add_argument("--target", type=float,
                        help="a difference in accuracy to detect (0.05: 5 points): the items "
                             "and the k it needs")
    parser.add_argument("--alpha", type=float, default=ALPHA, help="two-sided level "
                                                                     "(default: %(default)s)")
    parser.add_argument("--power", type=float, default=POWER, help="default: %(default)s")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


__all__ = ["ALPHA", "DISCORDANCE", "POWER", "RHO", "add_arguments"]
