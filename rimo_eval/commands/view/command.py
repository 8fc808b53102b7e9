"""``rimo-eval view [RUN ...] [--out DIR] [--cutoff RUN=DATE] [--serve [--port P]]``: the
transcript browser.

RUNs are resolved as ``rimo-eval compare`` resolves them (workspace, git revision or branch,
DVC experiment) and read through DVC at their revision; the site is static (see site.py).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from rimo_eval.commands.runs import WORKSPACE, resolve
from rimo_eval.commands.view.load import Run, load_run
from rimo_eval.commands.view.model import Site
from rimo_eval.commands.view.site import write_stream
from rimo_eval.core.artifacts import VIEW_DIR
from rimo_eval.core.config import Params
from rimo_eval.core.cutoff import parse_cutoffs
from rimo_eval.core.errors import ConfigError
from rimo_eval.core.hashing import sha256_bytes

# The default of --out: the workspace's run alone goes where the view stage writes it (the
# site the report links to); named runs go beside it, so a two-run site never stands in for the
# run the report shows.
DEFAULT_OUT = VIEW_DIR
NAMED_OUT = VIEW_DIR.parent / "views"
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_out(names: list[str]) -> Path:
    """``reports/view`` for the workspace alone, else ``reports/views/A+B`` (names made safe
    for a folder; a long list is cut and told apart by a hash)."""
    if set(names) <= {WORKSPACE}:
        return DEFAULT_OUT
    name = "+".join(UNSAFE.sub("_", n).strip(".") or "_" for n in names)
    if len(name) > 80:
        name = f"{name[:60]}-{sha256_bytes(chr(0).join(names).encode())[:12]}"
    return NAMED_OUT / name


def view(root: Path, names: list[str], out: Path, cutoffs: Mapping[str, str] | None = None
         ) -> dict[str, int]:
    """``cutoffs``: run -> training cutoff (``--cutoff``), over the run's own
    score.training_cutoff: the unseen filter's."""
    names = names or [WORKSPACE]
    if len(set(names)) != len(names):
        raise ConfigError(f"view: a run is named twice in {names}")
    runs: list[Run] = []
    try:
        for name in names:
            runs.append(load_run(root, resolve(root, name)))
        site = Site(runs, cutoffs)
        return write_stream(out, site.payloads(), lambda: (site.index(), site.words))
    finally:
        for run in runs:
            run.close()


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
    out = args.out if args.out is not None else default_out(list(args.runs))
    counts = view(Path("."), list(args.runs), out,
                  parse_cutoffs(getattr(args, "cutoff", None)))
    entry = (out / "index.html").resolve()
    print(f"view: wrote {counts['items']} items ({counts['files']} files, "
          f"{counts['bytes'] / 1e6:.1f} MB) to {out}; open {entry.as_uri()}",
          file=sys.stderr)
    if args.serve:
        serve(out, args.port)
    return 0


__all__ = ["DEFAULT_OUT", "NAMED_OUT", "default_out", "main", "serve", "view"]
