"""``rimo-eval leaderboard [RUN ...] [--all]``: rank runs, write md, tex, HTML, JSON, figures.

Runs are resolved and read as ``compare`` does (loading), refused unless comparable
(comparable), ranked with paired statistics (ranking), and rendered (board, tables,
figures). The files are written in a folder swapped in whole for ``--out`` (io/outputs.py);
``--json`` also prints the JSON.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rimo_eval.commands.compare.command import bootstrap_settings
from rimo_eval.commands.leaderboard.arguments import OUT_DIR
from rimo_eval.commands.leaderboard.board import build
from rimo_eval.commands.leaderboard.comparable import check, largest_group
from rimo_eval.commands.leaderboard.figures import figures
from rimo_eval.commands.leaderboard.loading import LeftOut, load_every, load_runs
from rimo_eval.commands.leaderboard.ranking import default_metric, find_metric
from rimo_eval.commands.leaderboard.tables import render_html, render_markdown, render_tex
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.io.atomic import dumps_json
from rimo_eval.io.outputs import claim_folder, output_folder
from rimo_eval.params.config import Params
from rimo_eval.params.cutoff import parse_cutoffs
from rimo_eval.run.reader import RunReader


def leaderboard(root: Path, names: list[str], every: bool = False, label: str = "exp",
                sort: str | None = None, samples: int = 1000, seed: int = 0,
                confidence: float = 0.95, cutoffs: dict[str, str] | None = None
                ) -> tuple[dict[str, Any], dict[str, str | bytes]]:
    """(the JSON object, file name -> content) for the runs; writes nothing.

    Named runs must all be comparable. ``every`` (``--all``) ranks the largest comparable group
    of the workspace and its experiments and lists the others under ``left_out``."""
    left: list[LeftOut] = []
    group = None
    with RunReader(root) as reader:  # one DVC repository handle for every run
        if every:
            if names:
                raise ConfigError("give RUN names or --all, not both")
            found, left = load_every(reader, label)
            runs, more, group = largest_group(found) if found else ([], [], None)
            left += more
            if len(runs) < 2:
                raise DataError("--all: no two comparable runs to rank. Left out:\n"
                                + "\n".join(f"  {x.label}: {x.reason}" for x in left))
        else:
            runs = load_runs(reader, names, every, label)
            check(runs)
    metric = find_metric(sort or default_metric(runs[0].k), runs[0].k)
    board = build(runs, metric, {"samples": samples, "seed": seed, "confidence": confidence},
                  cutoffs)
    board["left_out"] = [x.to_json() for x in left]
    if group is not None:
        board["group"] = group
    files: dict[str, str | bytes] = {
        "leaderboard.json": dumps_json(board, sort_keys=False),
        "leaderboard.md": render_markdown(board),
        "leaderboard.tex": render_tex(board),
    }
    figs = figures(board, runs)
    for name, by_format in figs.items():
        for fmt, data in by_format.items():
            files[f"{name}.{fmt}"] = data
    files["leaderboard.html"] = render_html(board, figs)
    return board, files


def write(out: Path, files: Mapping[str, str | bytes]) -> None:
    """The files in a folder that replaces ``out`` whole: a new, empty or earlier leaderboard
    folder, never one of the user's (io/outputs.py)."""
    with output_folder(out, "leaderboard", "leaderboard --out") as tmp:
        for name, content in files.items():
            (tmp / name).write_bytes(content.encode("utf-8") if isinstance(content, str)
                                     else content)


def main(args: argparse.Namespace, params: Params | None) -> int:
    """``params`` may be None: the runs carry their own metrics; score.bootstrap is used for
    the rank bootstrap when a params file is there, as compare does."""
    boot = bootstrap_settings(None if params is None else params.score, args)
    out = Path(args.out)
    claim_folder(out, "leaderboard", "leaderboard --out")  # refused before the work
    board, files = leaderboard(Path("."), list(args.runs), args.all, args.label, args.sort,
                               **boot, cutoffs=parse_cutoffs(getattr(args, "cutoff", None)))
    write(out, files)
    if "group" in board:
        print(f"leaderboard: {board['group']}", file=sys.stderr)
    for x in board["left_out"]:
        print(f"leaderboard: left out {x['label']}: {x['reason']}", file=sys.stderr)
    print(f"{len(board['runs'])} runs ranked by {board['ranked_by']}"
          + (f", {len(board['left_out'])} left out" if board["left_out"] else "")
          + f"; wrote {len(files)} files to {out.as_posix()}/", file=sys.stderr)
    if args.json:
        print(files["leaderboard.json"], end="")
    else:
        print(files["leaderboard.md"], end="")
    return 0


__all__ = ["OUT_DIR", "leaderboard", "main", "write"]
