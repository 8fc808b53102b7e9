"""``rimo-eval view [RUN ...] [--out DIR] [--cutoff RUN=DATE] [--serve [--port P]]
[--partial]``: the transcript browser.

RUNs are resolved as ``rimo-eval compare`` resolves them (workspace, git revision or branch,
DVC experiment) and read through DVC at their revision; the site is static (see site.py).
``--partial``: one run still in predict, from its response cache (partial.py).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import importlib
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.paths import VIEW_DIR
from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.commands.view.load import Run, load_run
from rimo_eval.commands.view.model import Site
from rimo_eval.commands.view.site import write_with
from rimo_eval.commands.view.workers import write_items
from rimo_eval.errors import ConfigError, StageError
from rimo_eval.io.hashing import sha256_bytes
from rimo_eval.io.outputs import claim_folder
from rimo_eval.params.config import Params
from rimo_eval.params.cutoff import parse_cutoffs
from rimo_eval.rimo.tracks import TRACK_N
from rimo_eval.run.reader import RunReader
from rimo_eval.run.revision import WORKSPACE

# The default of --out: the workspace's run alone goes where the view stage writes it (the
# site the report links to); named runs go beside it, so a two-run site never stands in for the
# run the report shows.
DEFAULT_OUT = VIEW_DIR
NAMED_OUT = VIEW_DIR.parent / "views"
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
PARTIAL = "rimo_eval.commands.view.partial"  # --partial: a run from its response cache


def default_out(names: list[str], partial: bool = False) -> Path:
    """``reports/view`` for the workspace alone, else ``reports/views/A+B`` (names made safe
    for a folder; a long list is cut and told apart by a hash); ``reports/views/A.partial``
    for ``--partial``, which never replaces the view stage's site."""
    if set(names) <= {WORKSPACE} and not partial:
        return DEFAULT_OUT
    if partial:
        base = WORKSPACE if set(names) <= {WORKSPACE} else default_out(names).name
        return NAMED_OUT / f"{base}.partial"
    name = "+".join(UNSAFE.sub("_", n).strip(".") or "_" for n in names)
    if len(name) > 80:
        name = f"{name[:60]}-{sha256_bytes(chr(0).join(names).encode())[:12]}"
    return NAMED_OUT / name


def view(root: Path, names: list[str], out: Path, cutoffs: Mapping[str, str] | None = None,
         partial: bool = False, jobs: int | None = None,
         search_reasoning: bool = False) -> dict[str, int]:
    """``cutoffs``: run -> training cutoff (``--cutoff``), over the run's own
    score.training_cutoff: the unseen filter's. ``partial``: the one run from its response
    cache (``--partial``). ``jobs``: processes making the items (workers.py; default one per
    CPU). ``search_reasoning``: the search covers the reasoning too (``--search-reasoning``).
    """
    names = names or [WORKSPACE]
    if len(set(names)) != len(names):
        raise ConfigError(f"view: a run is named twice in {names}")
    if partial and len(names) > 1:
        raise ConfigError(f"view --partial: one run at a time, got {names}: a partial run's "
                          "pending samples are not wrong answers, so it is not compared")
    claim_folder(out, "view", "view --out")  # refused before minutes of work, not after
    runs: list[Run] = []
    # One DVC repository handle for every run; it holds their files open while the site is
    # written.
    with RunReader(root) as reader:
        try:
            for name in names:
                runs.append(_load(reader, name, partial))
            site = Site(runs, cutoffs, search_reasoning)
            return write_with(out, lambda tmp: write_items(site, tmp, jobs),
                              lambda: (marked(site.index(), runs), site.words))
        finally:
            for run in runs:
                run.close()


def _load(reader: RunReader, name: str, partial: bool) -> Run:
    if partial:
        # By name, as cli.py loads each command: the view stage (`rimo-eval view`, no
        # --partial) never runs predict's code, so dvc.yaml does not rerun it when that changes.
        module = importlib.import_module(PARTIAL)
        loaded: Run = module.load_partial(reader, module.resolve_partial(reader, name))
        return loaded
    revision = reader.resolve(name)
    root = reader.root
    try:
        return load_run(reader, revision)
    except StageError as exc:
        if revision.rev is None and not (root / predictions_path(TRACK_N)).exists():
            raise type(exc)(f"{exc}\n(a predict still running? `rimo-eval view --partial` "
                            "shows what its response cache holds so far)") from None
        raise


def marked(index: dict[str, Any], runs: list[Run]) -> dict[str, Any]:
    """The index with each partial run's header saying how far its predict got (app.js's
    banner; its counts are of the replies so far, never metrics.json's)."""
    for head, run in zip(index["runs"], runs, strict=True):
        if run.partial is not None:
            head["partial"] = run.partial
    return index


def serve(folder: Path, port: int) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise ConfigError(f"view --serve: cannot listen on 127.0.0.1:{port} ({exc.strerror}): "
                          f"pick another --port, or 0 for any free one") from exc
    with server:
        print(f"view: serving http://127.0.0.1:{server.server_address[1]}/index.html "
              f"(Ctrl-C stops)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()


def main(args: argparse.Namespace, params: Params | None) -> int:
    partial = bool(getattr(args, "partial", False))
    out = args.out if args.out is not None else default_out(list(args.runs), partial)
    counts = view(Path("."), list(args.runs), out,
                  parse_cutoffs(getattr(args, "cutoff", None)), partial,
                  getattr(args, "jobs", None), bool(getattr(args, "search_reasoning", False)))
    entry = (out / "index.html").resolve()
    jobs = counts["jobs"]
    print(f"view: wrote {'a PARTIAL view of ' if partial else ''}{counts['items']} items "
          f"({counts['files']} files, {counts['bytes'] / 1e6:.1f} MB, made by {jobs} "
          f"process{'es' if jobs > 1 else ''}) to {out}; open {entry.as_uri()}",
          file=sys.stderr)
    if args.serve:
        serve(out, args.port)
    return 0


__all__ = ["DEFAULT_OUT", "NAMED_OUT", "default_out", "main", "serve", "view"]
