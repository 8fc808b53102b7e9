"""The ``rimo-eval`` command: the pipeline's stages (what dvc.yaml runs) and the tools that
read a run's results, each a thin shell over its module."""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from rimo_eval.errors import StageError
from rimo_eval.io.terminal import for_terminal
from rimo_eval.params.config import load_params

STAGES = {
    "check-params": "Validate the whole params file (DVC runs it on any change to the file)",
    "fetch": "Download the pinned upstream files (mirrors first) and verify their sha256",
    "validate": "Check every item (schemas, benchmark rules, JSONL vs CSV), apply errata",
    "predict": "Run the configured predictor backend over the items",
    "score": "Grade predictions; write per-item scores, metrics and plot data",
    "judge": "Opt-in RIMO-P grading by an LLM judge (never the primary metric); --calibrate",
    "report": "Execute the report notebook with papermill and export HTML",
}
# Where each command lives: a stage is a module or a package's ``stage`` module.
MODULES = {
    "check-params": "rimo_eval.check_params",
    "fetch": "rimo_eval.fetch",
    "validate": "rimo_eval.validate.stage",
    "predict": "rimo_eval.predict",
    "score": "rimo_eval.score.stage",
    "judge": "rimo_eval.judge.stage",
    "report": "rimo_eval.report.stage",
    "audit": "rimo_eval.commands.audit.command",
    "compare": "rimo_eval.commands.compare.command",
    "summary": "rimo_eval.commands.summary",
    "leaderboard": "rimo_eval.commands.leaderboard.command",
    "view": "rimo_eval.commands.view.command",
    "cache": "rimo_eval.commands.cache",
    "sweep": "rimo_eval.commands.sweep.command",
    "plan": "rimo_eval.commands.plan.command",
    "export": "rimo_eval.commands.export.command",
    "items": "rimo_eval.commands.items.command",
}
# Where each tool declares its arguments (``add_arguments(parser)``): a light module, as the
# parser is built for every command, stages included.
ARGUMENTS = {
    "audit": "rimo_eval.commands.audit.arguments",
    "compare": "rimo_eval.commands.compare.arguments",
    "leaderboard": "rimo_eval.commands.leaderboard.arguments",
    "view": "rimo_eval.commands.view.arguments",
    "cache": "rimo_eval.commands.cache_arguments",
    "sweep": "rimo_eval.commands.sweep.arguments",
    "plan": "rimo_eval.commands.plan.arguments",
    "export": "rimo_eval.commands.export.arguments",
    "items": "rimo_eval.commands.items.arguments",
}
# Commands that run without a params file (they use one when it is there).
PARAMS_OPTIONAL = {"audit", "compare", "summary", "leaderboard", "view", "cache", "sweep",
                   "plan", "export", "items"}
# Tools beyond the pipeline: they take their own arguments and return an exit status.
TOOLS = {
    "audit": "Recompute every metric and check each hash chain down to the upstream pin",
    "compare": "Compare two revisions, branches or DVC experiments: metrics, flips, paired tests",
    "summary": "A dozen lines on the last run: headline metrics, sample or full, backend, report",
    "leaderboard": "Rank many runs: table (md, tex, HTML, JSON), rank ranges, tests, figures",
    "view": "Browse every answer of one or more runs: a static site with rendered math",
    "cache": "The response cache: stats, prune (by age, model, endpoint), verify",
    "sweep": "A model sweep as a Slurm job array: submit, status (each task an experiment)",
    "plan": "Power: the RIMO-N difference a run could detect against another; size for a target",
    "export": "A run as Every Eval Ever 0.3.0 files or a Hugging Face .eval_results file",
    "items": "Audit items over many runs: solve rates, 2PL IRT, suspect golds, suggested errata",
}


DESCRIPTION = """\
rimo-eval: evaluate a model on the RIMO olympiad-math benchmark (RIMO-N and RIMO-P), with
every number traceable to the pinned upstream data, the params and the code.

The usual way in is DVC, which runs the pipeline's stages in order, only those whose inputs
changed, and records each in dvc.lock:
  dvc repro                                  the run params.yaml describes
  dvc exp run --temp -S predict.limit=null   an experiment: params changed for that run only"""
EPILOG = """\
Each stage reads its own section of params.yaml (--params FILE for another file, before or
after the command); `rimo-eval COMMAND --help` says more about one command."""
# The params each stage reads (dvc.yaml lists them as the stage's params).
SECTIONS = {"check-params": "the whole file",
            "fetch": "its fetch section", "validate": "its validate section",
            "predict": "its predict section",
            "score": "its score section, the fetch pin, predict.limit and predict.sample_seed",
            "judge": "its judge section", "report": "its report section"}


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    def of(name: str) -> str:
        try:
            return installed(name)
        except PackageNotFoundError:
            return "unknown"
    return f"rimo-eval {of('rimo-eval')} (dvc {of('dvc')}, Python {sys.version.split()[0]})"


def stage_description(name: str) -> str:
    how = (f"Reads params.yaml ({SECTIONS[name]}; another file with --params FILE). This runs "
           f"the stage by hand; the normal way in is `dvc repro` (or `dvc exp run`), which "
           f"runs it when its inputs changed, after the stages it depends on, and records it "
           f"in dvc.lock.")
    return f"{STAGES[name]}.\n\n{textwrap.fill(how, 79)}"


def _listing(names: dict[str, str]) -> str:
    width = max(len(name) for name in {**STAGES, **TOOLS})
    return "\n".join(f"  {name:<{width}}  {text}" for name, text in names.items())


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given ``argv``, a tool's own arguments are declared only for the
    tools it names (a stage's run then imports none of them: `cache`'s pull in the cache
    engine)."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="rimo-eval", formatter_class=raw,
        description=(f"{DESCRIPTION}\n\npipeline stages (dvc.yaml runs them):\n"
                     f"{_listing(STAGES)}\n\ntools (they read a run's results):\n"
                     f"{_listing(TOOLS)}"),
        epilog=EPILOG)
    parser.add_argument("--params", default="params.yaml",
                        help="params file (default: %(default)s)")
    parser.add_argument("--version", action="version", version=version())
    # --params after the command too; SUPPRESS keeps the top-level value when it is absent.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--params", default=argparse.SUPPRESS,
                        help="params file (default: params.yaml)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands", help="one of the stages or tools above")
    stage_parsers = {name: sub.add_parser(name, description=stage_description(name),
                                          formatter_class=raw, parents=[common])
                     for name in STAGES}
    stage_parsers["predict"].add_argument(
        "--estimate", action="store_true",
        help="print the requests, how many are cached and the prompt tokens; send nothing, "
             "write nothing")
    batch = stage_parsers["predict"].add_mutually_exclusive_group()
    batch.add_argument("--batch-status", action="store_true",
                       help="list the live batches (OpenAI, or Anthropic's with backend "
                            "anthropic) of the cache's records (ids, states, counts); send no "
                            "request")
    batch.add_argument("--batch-cancel", action="store_true",
                       help="cancel those live batches (the next predict collects what they "
                            "answered and asks the rest again)")
    batch.add_argument("--export-batch", metavar="FILE",
                       help="write this round's requests as an OpenAI batch JSONL (for "
                            "`vllm run-batch`); send nothing")
    batch.add_argument("--import-batch", metavar="FILE",
                       help="read an engine's batch output JSONL into the response cache")
    stage_parsers["judge"].add_argument(
        "--calibrate", action="store_true",
        help="measure the judge on references and swapped solutions instead")

    def tool(name: str) -> argparse.ArgumentParser:
        # Every command takes --params on either side of its name.
        return sub.add_parser(name, description=TOOLS[name], parents=[common])

    # Each tool declares its own arguments (ARGUMENTS); one without any needs only its lines
    # in TOOLS and MODULES.
    named = None if argv is None else set(argv)
    for name in TOOLS:
        parser_of_tool = tool(name)
        if name in ARGUMENTS and (named is None or name in named):
            importlib.import_module(ARGUMENTS[name]).add_arguments(parser_of_tool)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    try:
        # audit, compare and summary read the artifacts: a params file is optional for them.
        optional = args.command in PARAMS_OPTIONAL and not Path(args.params).exists()
        # Validated once, here: every stage receives the typed sections and the file's path.
        params = None if optional else load_params(args.params)
        module = importlib.import_module(MODULES[args.command])
        if args.command in TOOLS:
            return int(module.main(args, params))  # the typed file, or None where there is none
        assert params is not None  # a stage is not PARAMS_OPTIONAL: its file was loaded
        if getattr(args, "batch_status", False) or getattr(args, "batch_cancel", False):
            print(module.batch_admin(params.predict, cancel=args.batch_cancel))
            return 0
        if getattr(args, "export_batch", None) or getattr(args, "import_batch", None):
            export = bool(args.export_batch)
            print(module.batch_file(params.predict, args.export_batch or args.import_batch,
                                    export))
            return 0
        if getattr(args, "estimate", False):
            print(module.estimate(params.predict, params_path=params.path))
            return 0
        # ``judge --calibrate``: the judge stage's other entry point.
        (module.calibrate if getattr(args, "calibrate", False) else module.run)(params)
    except StageError as exc:
        # A server's or model's text may be quoted: no terminal control reaches the screen.
        print(for_terminal(f"rimo-eval {args.command}: error: {exc}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"rimo-eval {args.command}: interrupted; artifacts left as they were",
              file=sys.stderr)
        return 130
    return 0


def entry() -> NoReturn:
    """The ``rimo-eval`` command."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
