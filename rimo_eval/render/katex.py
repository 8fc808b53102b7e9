"""KaTeX, the one math renderer of every page the project writes (the view's site, the report),
from the npm registry: pinned with its integrity hash in package-lock.json, installed by
``npm ci`` (``make setup``). No CDN: a page renders its math offline.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

from rimo_eval.errors import ConfigError

FILES = ("katex.min.js", "katex.min.css")
AUTO_RENDER = "contrib/auto-render.min.js"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# One font rule of katex.min.css: woff2, woff and ttf of one face. Chromium takes the first.
_FONT_SRC = re.compile(r"src:url\(fonts/([A-Za-z0-9_-]+)\.woff2\) format\(\"woff2\"\)[^;}]*")


def katex_dir() -> Path:
    """The ``katex/dist`` folder: ``$RIMO_EVAL_KATEX_DIR``, else the project's node_modules."""
    env = os.environ.get("RIMO_EVAL_KATEX_DIR")
    found = Path(env) if env else PROJECT_ROOT / "node_modules/katex/dist"
    if not all((found / f).is_file() for f in (*FILES, AUTO_RENDER)):
        raise ConfigError(f"KaTeX not found in {found}: run `make setup` (it runs `npm ci` "
                          f"from package-lock.json), or set RIMO_EVAL_KATEX_DIR to a katex/dist "
                          f"folder")
    return found


def inline_css(folder: Path) -> str:
    """katex.min.css with each face's woff2 font inlined as a data: URL (and its woff and ttf
    fallbacks dropped), for a page that must be one self-contained file."""
    css = (folder / "katex.min.css").read_text(encoding="utf-8")

    def font(m: re.Match[str]) -> str:
        data = (folder / "fonts" / f"{m.group(1)}.woff2").read_bytes()
        return f'src:url(data:font/woff2;base64,{base64.b64encode(data).decode()}) format("woff2")'

    inlined = _FONT_SRC.sub(font, css)
    if "url(fonts/" in inlined:
        raise ConfigError(f"{folder / 'katex.min.css'}: a font rule this KaTeX version writes "
                          f"differently; cannot inline it")
    return inlined


def inline_script(folder: Path, name: str) -> str:
    """A KaTeX script's text, checked that it can sit inside a <script> element."""
    code = (folder / name).read_text(encoding="utf-8")
    if "</script" in code.lower() or "<!--" in code:
        raise ConfigError(f"{folder / name}: cannot be inlined (holds </script or <!--)")
    return code


__all__ = ["AUTO_RENDER", "FILES", "inline_css", "inline_script", "katex_dir"]
