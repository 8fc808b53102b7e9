"""The HTML page of ``dvc plots show`` / ``dvc plots diff``, with Vega inlined so it renders
offline.

DVC's own page loads Vega, Vega-Lite and vega-embed from a CDN, so with no network it is blank.
DVC lets a project give its own page (``.dvc/config`` ``plots.html_template``; the page must
hold ``{plot_divs}``, and with no ``{scripts}`` DVC adds no script tag of its own). This module
builds that page from the pinned npm packages (package.json, package-lock.json; ``npm ci``),
every script inlined, so ``dvc_plots/index.html`` is one self-contained file wherever it is
written or copied. A Content-Security-Policy lets the page load nothing from anywhere.
``make setup`` runs it: ``python -m rimo_eval.commands.plots_page``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rimo_eval.errors import DataError
from rimo_eval.io.atomic import write_text

PAGE = Path(".dvc/plots/page.html")
# (npm package, its UMD build): the order they must load in.
SCRIPTS = (("vega", "build/vega.min.js"), ("vega-lite", "build/vega-lite.min.js"),
           ("vega-embed", "build/vega-embed.min.js"))
# Vega compiles its expressions with Function(): 'unsafe-eval'. Nothing may be fetched.
CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
       "style-src 'unsafe-inline'; img-src data: blob:")
DVC_PLACEHOLDERS = ("{plot_divs}", "{scripts}", "{refresh_tag}")


def _script(modules: Path, package: str, build: str) -> str:
    path = modules / package / build
    meta = modules / package / "package.json"
    if not path.is_file() or not meta.is_file():
        raise DataError(f"{path.as_posix()}: not found: run `npm ci` (or `make setup`) first")
    version = json.loads(meta.read_text(encoding="utf-8")).get("version")
    code = path.read_text(encoding="utf-8")
    # Inline, the code must not close its own tag or look like one of DVC's placeholders.
    if "</script" in code.lower() or any(p in code for p in DVC_PLACEHOLDERS):
        raise DataError(f"{path.as_posix()}: cannot be inlined (holds </script or a DVC "
                        f"placeholder)")
    return f"<script>/* {package} {version} */\n{code}\n</script>"


def build(modules: Path = Path("node_modules")) -> str:
    """The page, from the npm packages installed in ``modules``."""
    scripts = "\n".join(_script(modules, package, b) for package, b in SCRIPTS)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
{{refresh_tag}}
<title>rimo-eval: dvc plots</title>
<style>body{{font-family:system-ui,sans-serif;margin:1.5em}}table{{border-spacing:15px}}</style>
{scripts}
</head>
<body>
<p>RIMO plots (one bar per experiment; error bars: 95% intervals). Vega is inlined: this page
loads nothing from the network.</p>
{{plot_divs}}
</body>
</html>
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository root")
    parser.add_argument("--node-modules", type=Path, default=None,
                        help="where npm installed the packages (default: ROOT/node_modules)")
    args = parser.parse_args(argv)
    try:
        write_text(args.root / PAGE, build(args.node_modules or args.root / "node_modules"))
    except DataError as exc:
        print(f"plots page: error: {exc}", file=sys.stderr)
        return 1
    print(f"plots page: wrote {(args.root / PAGE).as_posix()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["CSP", "PAGE", "build", "main"]
