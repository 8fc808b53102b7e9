"""``rimo-eval items RUN... | --all``: the item audit over many runs (rimo_eval.commands.items.
audit), read through the one run reader as the leaderboard reads its runs, refused as the
leaderboard refuses runs that are not comparable; the outputs go to a folder the tool owns
(rimo_eval.io.outputs)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rimo_eval.commands.items.audit import MIN_RUNS, ItemsError, audit, suggested_errata
from rimo_eval.commands.items.matrix import build_matrix
from rimo_eval.commands.items.render import errata_yaml, figure, html, markdown
from rimo_eval.commands.leaderboard.comparable import check, largest_group
from rimo_eval.commands.leaderboard.loading import Run, load_every, load_runs
from rimo_eval.errors import DataError
from rimo_eval.io.outputs import claim_folder, output_folder
from rimo_eval.params.config import Params
from rimo_eval.run.reader import RunReader

TOOL = "items"
WHERE = "items --out"


def load(root: Path, names: list[str], every: bool) -> tuple[list[Run], str | None]:
    """The runs to audit (and, with ``--all``, the line saying which group and why)."""
    with RunReader(root) as reader:
        if every:
            if names:
                raise DataError("give RUN names or --all, not both")
            found, _ = load_every(reader)
            runs, _, why = largest_group(found) if found else ([], [], "")
            if len(runs) < MIN_RUNS:
                raise ItemsError(f"--all: the largest group of comparable runs holds "
                                 f"{len(runs)}; the item audit needs at least {MIN_RUNS} "
                                 f"runs over the same items at one k ({why or 'no runs'})")
            return runs, why
        runs = load_runs(reader, names)
        check(runs)
        return runs, None


def items(root: Path, names: list[str], every: bool = False) -> tuple[dict[str, Any], str | None]:
    runs, why = load(root, names, every)
    matrix = build_matrix([r.label for r in runs], [r.scores for r in runs], [r.k for r in runs])
    result = audit(matrix)
    if why:
        result["group"] = why
    return result, why


def main(args: argparse.Namespace, params: Params | None) -> int:
    out = Path(args.out)
    claim_folder(out, TOOL, WHERE)  # refuse a folder we did not write before any work
    result, why = items(Path("."), list(args.runs), args.all)
    text = json.dumps(result, indent=1, ensure_ascii=False, sort_keys=False) + "\n"
    files: dict[str, str | bytes] = {
        "items.json": text, "items.md": markdown(result, limit=None),
        "items.html": html(result), "items.png": figure(result),
        "suggested_errata.yaml": errata_yaml(suggested_errata(result, result["runs"]))}
    with output_folder(out, TOOL, WHERE) as folder:
        for name, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            (folder / name).write_bytes(data)
    if why:
        print(why, file=sys.stderr)
    print(text if args.json else markdown(result, limit=args.rows), end="")
    print(f"wrote {out.as_posix()}/: items.json, items.md, items.html, items.png, "
          f"suggested_errata.yaml (for a person to check; never applied)", file=sys.stderr)
    return 0


__all__ = ["items", "load", "main"]
