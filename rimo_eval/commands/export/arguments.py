"""``rimo-eval export``'s arguments (rimo_eval.commands.arguments says why a module of its own)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rimo_eval.commands.arguments import RUN_HELP, WORKSPACE

FORMATS = ("eee", "hf")
DATASET_ID = "ziye2chen/RIMO"  # the benchmark's repository (fetch.repo's default)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", default=WORKSPACE, metavar="RUN",
                        help=f"{RUN_HELP} (default: the workspace)")
    parser.add_argument("--format", required=True, choices=FORMATS,
                        help="eee: Every Eval Ever 0.3.0 (the aggregate JSON and one instance "
                             "JSONL row per item and sample, under data/rimo/DEV/MODEL/, the "
                             "datastore's layout); hf: the .eval_results/rimo.yaml a Hugging "
                             "Face model repo carries")
    parser.add_argument("--out", type=Path, required=True,
                        help="folder to write, new or one `rimo-eval export` wrote (replaced "
                             "whole)")
    parser.add_argument("--model-id", default=None, metavar="ORG/NAME",
                        help="the model's Hugging Face id (default: the run's model name, "
                             "under 'unknown/' where it has no organisation)")
    parser.add_argument("--organization", default="unknown", metavar="NAME",
                        help="who ran the evaluation (EEE source_organization_name; default: "
                             "%(default)s)")
    parser.add_argument("--dataset-id", default=DATASET_ID, metavar="ID",
                        help="the benchmark's dataset id in the hf file (default: %(default)s)")
    parser.add_argument("--source-url", default=None, metavar="URL",
                        help="hf: where the result can be checked (default: the upstream "
                             "repository at the pinned revision)")


__all__ = ["DATASET_ID", "FORMATS", "add_arguments"]
