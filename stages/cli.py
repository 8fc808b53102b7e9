"""``rimo-eval``: one subcommand per pipeline stage, each a thin shell over its module."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from stages.errors import StageError
from stages.params import load_params

STAGES = {
    "fetch": "Download the pinned upstream files (mirrors first) and verify their sha256",
    "validate": "Check every item (schemas, benchmark rules, JSONL vs CSV), apply errata",
    "predict": "Run the configured predictor backend over the items",
    "score": "Grade predictions; write per-item scores, metrics and plot data",
    "report": "Execute the report notebook with papermill and export HTML",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rimo-eval", description=__doc__)
    parser.add_argument("--params", default="params.yaml",
                        help="params file (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="STAGE")
    for name, help_text in STAGES.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        params = load_params(args.params)
        importlib.import_module(f"stages.{args.command}").run(params)
    except StageError as exc:
        print(f"rimo-eval {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"rimo-eval {args.command}: interrupted; artifacts left as they were",
              file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
