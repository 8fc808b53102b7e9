"""What the tools' command lines share: how a run is named, the bootstrap overrides and a
run's training cutoff. Each tool declares its own arguments in its ``arguments`` module (light:
the ``rimo-eval`` parser is built for every command, stages included), with these pieces."""

from __future__ import annotations

import argparse

from rimo_eval.run.revision import WORKSPACE  # the run in the working tree, as tools name it

RUN_HELP = f"git revision, branch, DVC experiment name, or '{WORKSPACE}'"


def add_bootstrap(parser: argparse.ArgumentParser, helps: tuple[str, str, str]) -> None:
    """``--samples``, ``--seed``, ``--confidence``: each overrides its ``score.bootstrap`` key
    (None when not given; see compare.command.bootstrap_settings)."""
    for (name, kind), text in zip((("--samples", int), ("--seed", int),
                                   ("--confidence", float)), helps, strict=True):
        parser.add_argument(name, type=kind, help=text)


def add_cutoff(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--cutoff", action="append", metavar="RUN=DATE",
                        help=f"a run's training cutoff (YYYY[-MM[-DD]]), for {what} (default: "
                             f"the run's score.training_cutoff); repeatable")


__all__ = ["RUN_HELP", "WORKSPACE", "add_bootstrap", "add_cutoff"]
