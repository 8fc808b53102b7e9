"""``rimo-eval``: one subcommand per pipeline stage, each a thin shell over its module."""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from stages.core.config import load_params
from stages.core.errors import StageError

STAGES = {
    "fetch": "Download the pinned upstream files (mirrors first) and verify their sha256",
    "validate": "Check every item (schemas, benchmark rules, JSONL vs CSV), apply errata",
    "predict": "Run the configured predictor backend over the items",
    "score": "Grade predictions; write per-item scores, metrics and plot data",
    "judge": "Opt-in RIMO-P grading by an LLM judge (never the primary metric); --calibrate",
    "report": "Execute the report notebook with papermill and export HTML",
}
# Where each command lives: a stage is a module or a package's ``stage`` module.
MODULES = {
    "fetch": "stages.fetch",
    "validate": "stages.validate.stage",
    "predict": "stages.predict",
    "score": "stages.score.stage",
    "judge": "stages.judge.stage",
    "report": "stages.report.stage",
    "audit": "stages.commands.audit.command",
    "compare": "stages.commands.compare.command",
    "summary": "stages.commands.summary",
}
# Commands that run without a params file (they use one when it is there).
PARAMS_OPTIONAL = {"compare", "summary"}
# Tools beyond the pipeline: they take their own arguments and return an exit status.
TOOLS = {
    "audit": "Recompute every metric and check each hash chain down to the upstream pin",
    "compare": "Compare two revisions, branches or DVC experiments: metrics, flips, paired tests",
    "summary": "A dozen lines on the last run: headline metrics, sample or full, backend, report",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rimo-eval", description=__doc__)
    parser.add_argument("--params", default="params.yaml",
                        help="params file (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    stage_parsers = {name: sub.add_parser(name, help=help_text, description=help_text)
                     for name, help_text in STAGES.items()}
    stage_parsers["predict"].add_argument(
        "--estimate", action="store_true",
        help="print the requests, how many are cached and the prompt tokens; send nothing, "
             "write nothing")
    stage_parsers["judge"].add_argument(
        "--calibrate", action="store_true",
        help="measure the judge on references and swapped solutions instead")
    audit = sub.add_parser("audit", help=TOOLS["audit"], description=TOOLS["audit"])
    audit.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    compare = sub.add_parser("compare", help=TOOLS["compare"], description=TOOLS["compare"])
    for side in ("a", "b"):
        compare.add_argument(side, metavar=side.upper(),
                             help="git revision, branch, DVC experiment name, or 'workspace'")
    compare.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    compare.add_argument("--html", metavar="PATH", help="also write a self-contained HTML report")
    compare.add_argument("--flips", type=int, metavar="N", help="flips listed per track (20)")
    compare.add_argument("--all-flips", action="store_true", help="list every flipped item")
    compare.add_argument("--samples", type=int,
                         help="paired bootstrap resamples (default: score.bootstrap, or 1000)")
    compare.add_argument("--seed", type=int, help="bootstrap seed (default: score.bootstrap, or 0)")
    compare.add_argument("--confidence", type=float,
                         help="bootstrap interval level (default: score.bootstrap, or 0.95)")
    sub.add_parser("summary", help=TOOLS["summary"], description=TOOLS["summary"])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        # compare and summary read the artifacts: a params file is optional for them.
        optional = args.command in PARAMS_OPTIONAL and not Path(args.params).exists()
        # Validated once, here: every stage receives the typed sections and the file's path.
        params = None if optional else load_params(args.params)
        module = importlib.import_module(MODULES[args.command])
        if args.command in TOOLS:
            return int(module.main(args, None if params is None else params.as_dict()))
        if getattr(args, "estimate", False):
            print(module.estimate(params.predict.as_dict()))
            return 0
        # ``judge --calibrate``: the judge stage's other entry point.
        (module.calibrate if getattr(args, "calibrate", False) else module.run)(params)
    except StageError as exc:
        print(f"rimo-eval {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"rimo-eval {args.command}: interrupted; artifacts left as they were",
              file=sys.stderr)
        return 130
    return 0


def entry() -> NoReturn:
    """The ``rimo-eval`` command: ``main``, then an exit without the interpreter's teardown.

    Freeing every module and object at exit took a tenth of a second after a predict run, as
    long as writing both predictions tables. The exit handlers still run and the streams are
    flushed; with a non-daemon thread still at work the exit is the normal one, which waits.
    """
    # Fewer, later collections (as mypy does): a stage allocates hundreds of thousands of
    # objects that live until it ends, and the default threshold (700) traversed them over
    # and over, 0.15 s of a fast predict run in pauses of up to 60 ms.
    gc.set_threshold(100_000, 20, 20)
    status = main()
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(not t.daemon for t in others):
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


if __name__ == "__main__":
    entry()
