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

from rimo_eval.core.config import load_params
from rimo_eval.core.errors import StageError

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
}
# Commands that run without a params file (they use one when it is there).
PARAMS_OPTIONAL = {"audit", "compare", "summary", "leaderboard", "view", "cache", "sweep"}
# Tools beyond the pipeline: they take their own arguments and return an exit status.
TOOLS = {
    "audit": "Recompute every metric and check each hash chain down to the upstream pin",
    "compare": "Compare two revisions, branches or DVC experiments: metrics, flips, paired tests",
    "summary": "A dozen lines on the last run: headline metrics, sample or full, backend, report",
    "leaderboard": "Rank many runs: table (md, tex, HTML, JSON), rank ranges, tests, figures",
    "view": "Browse every answer of one or more runs: a static site with rendered math",
    "cache": "The response cache: stats, prune (by age, model, endpoint), verify",
    "sweep": "A model sweep as a Slurm job array: submit, status (each task an experiment)",
}


DESCRIPTION = """\
rimo-eval: evaluate a model on the RIMO olympiad-math benchmark (RIMO-N and RIMO-P), with
every number traceable to the pinned upstream data, the params and the code.

The usual way in is DVC, which runs the pipeline's stages in order, only those whose inputs
changed, and records each in dvc.lock:
  dvc repro                                  the run params.yaml describes
  dvc exp run -S predict.limit=null          an experiment: params changed on the command line"""
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


def build_parser() -> argparse.ArgumentParser:
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

    audit = tool("audit")
    audit.add_argument("name", nargs="?", metavar="NAME", default="workspace",
                       help="git revision, branch, DVC experiment name, or 'workspace' "
                            "(default), as compare takes them")
    audit.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    compare = tool("compare")
    for side in ("a", "b"):
        compare.add_argument(side, metavar=side.upper(),
                             help="git revision, branch, DVC experiment name, or 'workspace'")
    compare.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    compare.add_argument("--html", metavar="PATH", help="also write a self-contained HTML report")
    compare.add_argument("--flips", type=int, metavar="N", help="flips listed per track (20)")
    compare.add_argument("--all-flips", action="store_true", help="list every flipped item")
    compare.add_argument("--strict", action="store_true",
                         help="refuse two runs over different items (default: compare on the "
                              "items both have, and say so first)")
    compare.add_argument("--samples", type=int,
                         help="paired bootstrap resamples (default: score.bootstrap, or 1000)")
    compare.add_argument("--seed", type=int, help="bootstrap seed (default: score.bootstrap, or 0)")
    compare.add_argument("--confidence", type=float,
                         help="bootstrap interval level (default: score.bootstrap, or 0.95)")
    board = tool("leaderboard")
    board.add_argument("runs", nargs="*", metavar="RUN",
                       help="DVC experiment name, git revision or branch, or 'workspace'")
    board.add_argument("--all", action="store_true",
                       help="the workspace and every DVC experiment of its baseline")
    board.add_argument("--out", default="reports/leaderboard", help="folder (default: %(default)s)")
    board.add_argument("--json", action="store_true", help="print the JSON, not the Markdown")
    board.add_argument("--label", choices=("exp", "model"), default="exp",
                       help="name rows by experiment (default) or by model")
    board.add_argument("--sort", metavar="METRIC", help="metric to rank by (default "
                       "RIMO-N.accuracy; RIMO-N.mean_at_k.accuracy at k > 1)")
    for name, kind in (("--samples", int), ("--seed", int), ("--confidence", float)):
        board.add_argument(name, type=kind, help="rank bootstrap (default: score.bootstrap)")
    board.add_argument("--cutoff", action="append", metavar="RUN=DATE",
                       help="a run's training cutoff (YYYY[-MM[-DD]]), for its unseen subset "
                       "(default: the run's score.training_cutoff); repeatable")
    view = tool("view")
    view.add_argument("runs", nargs="*", metavar="RUN",
                      help="git revision, branch, DVC experiment name, or 'workspace' "
                           "(default: the workspace)")
    view.add_argument("--out", type=Path,
                      help="folder of the static site (default: reports/view, the view "
                           "stage's site, for the workspace alone; reports/views/A+B for "
                           "named runs)")
    view.add_argument("--cutoff", action="append", metavar="RUN=DATE",
                      help="a run's training cutoff (YYYY[-MM[-DD]]), for the unseen filter "
                      "(default: the run's score.training_cutoff); repeatable")
    view.add_argument("--serve", action="store_true",
                      help="then serve the folder on 127.0.0.1 and print the URL")
    view.add_argument("--port", type=int, default=8765, help="port for --serve (0: any)")
    importlib.import_module(MODULES["cache"]).add_arguments(tool("cache"))
    importlib.import_module(MODULES["sweep"]).add_arguments(tool("sweep"))
    # A tool with no arguments of its own needs only its lines in TOOLS and MODULES.
    for name in [n for n in TOOLS if n not in sub.choices]:
        tool(name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        # audit, compare and summary read the artifacts: a params file is optional for them.
        optional = args.command in PARAMS_OPTIONAL and not Path(args.params).exists()
        # Validated once, here: every stage receives the typed sections and the file's path.
        params = None if optional else load_params(args.params)
        module = importlib.import_module(MODULES[args.command])
        if args.command in TOOLS:
            return int(module.main(args, None if params is None else params.as_dict()))
        assert params is not None  # only tools (above) run without a params file
        if getattr(args, "batch_status", False) or getattr(args, "batch_cancel", False):
            print(module.batch_admin(params.predict, cancel=args.batch_cancel))
            return 0
        if getattr(args, "export_batch", None) or getattr(args, "import_batch", None):
            export = bool(args.export_batch)
            print(module.batch_file(params.predict, args.export_batch or args.import_batch,
                                    export))
            return 0
        if getattr(args, "estimate", False):
            print(module.estimate(params.predict))
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
    """The ``rimo-eval`` command."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
