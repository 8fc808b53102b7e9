"""Writing the static site: the page, its assets, KaTeX, and the data as script files.

The data are ``<script src>`` files, not JSON, because Chromium blocks fetch()/XHR of
``file://`` pages: ``data/index.js`` (the grid, headers and flips, loaded at once),
``data/items/NNNNN.js`` (one item with every run and sample, loaded when it opens: its texts
compressed once, packing.py, rendered in the page when shown) and ``data/search/NNN.js``
(each item's distinct words, loaded at the first search). JSON is
written with sorted keys and ASCII escapes and nothing carries a time, so the same runs give
a byte-identical site. The folder is built beside DIR and swapped in whole, and only
replaces a folder the view wrote (io/outputs.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from rimo_eval.commands.view.packing import encode, pack
from rimo_eval.errors import ConfigError
from rimo_eval.io.outputs import output_folder
from rimo_eval.render.katex import FILES as KATEX_FILES
from rimo_eval.render.katex import katex_dir

ASSETS = ("index.html", "markdown.js", "text.js", "app.js", "app.css")
# The page's Markdown parser, sanitiser and Zstandard decoder, from node_modules beside KaTeX's
# (package-lock.json pins them with their integrity hashes): site path -> path under
# node_modules.
VENDOR = {"vendor/markdown-it.min.js": "markdown-it/dist/markdown-it.min.js",
          "vendor/purify.min.js": "dompurify/dist/purify.min.js",
          "vendor/fzstd.min.js": "fzstd/umd/index.js"}


def vendor_files(katex: Path) -> dict[str, Path]:
    """VENDOR's files, found in the node_modules that holds ``katex`` (its dist folder)."""
    modules = katex.parents[1]
    found = {name: modules / rel for name, rel in VENDOR.items()}
    missing = [str(p) for p in found.values() if not p.is_file()]
    if missing:
        raise ConfigError(f"view: {', '.join(missing)} not found: run `make setup` (it runs "
                          f"`npm ci` from package-lock.json)")
    return found


SEARCH_CHUNK = 64


def script(call: str, *args: Any, blob: str | None = None) -> bytes:
    """``RIMO.call(args..., blob)``: each arg as ASCII JSON; ``blob`` (packing's base64, a
    string) last, written as it is: nothing in it to escape, and json.dumps would scan
    megabytes of it."""
    body = ",".join(json.dumps(a, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
                    for a in args)
    if blob is not None:
        body += f',"{blob}"'
    return f"RIMO.{call}({body});\n".encode("ascii")


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_item(tmp: Path, n: int, payload: dict[str, Any]) -> None:
    """Item ``n``'s script file, its texts packed (packing.py)."""
    payload, blob = pack(payload)
    _write(tmp / f"data/items/{n:05d}.js", script("item", n, payload, blob=blob))


def write_items_here(tmp: Path, payloads: Iterable[dict[str, Any]]) -> int:
    """Every payload's item file, in this process, numbered in order; how many."""
    count = 0
    for n, payload in enumerate(payloads):
        write_item(tmp, n, payload)
        count += 1
    return count


def write_site(out: Path, index: dict[str, Any], payloads: Iterable[dict[str, Any]],
               words: list[str]) -> dict[str, int]:
    """Write the site to ``out`` (replaced whole); return counts of what was written."""
    return write_stream(out, payloads, lambda: (index, words))


def write_stream(out: Path, payloads: Iterable[dict[str, Any]],
                 finish: Callable[[], tuple[dict[str, Any], list[str]]]) -> dict[str, int]:
    """``write_site`` with the payloads written as they come (one item's every run and sample
    at a time, so a k = 64 reasoning run is never held whole) and the index and search words,
    which only the last payload completes, asked of ``finish`` after them."""
    return write_with(out, lambda tmp: {"items": write_items_here(tmp, payloads), "jobs": 1},
                      finish)


def write_with(out: Path, items: Callable[[Path], dict[str, int]],
               finish: Callable[[], tuple[dict[str, Any], list[str]]]) -> dict[str, int]:
    """The site in a folder beside ``out``: the page and its assets, then ``items(folder)``
    writes the item files (and returns how many, ``items``, by how many processes, ``jobs``),
    then the index and search words of ``finish``; the folder then replaces ``out`` whole
    (nothing half-written is ever at ``out``), which must be new, empty or an earlier site:
    io/outputs.py."""
    katex = katex_dir()
    with output_folder(out, "view", "view --out") as tmp:
        for name in ASSETS:
            _write(tmp / name, resources.files("rimo_eval.commands.view").joinpath(
                "assets", name).read_bytes())
        for name, path in vendor_files(katex).items():
            _write(tmp / name, path.read_bytes())
        for name in KATEX_FILES:
            _write(tmp / "katex" / name, (katex / name).read_bytes())
        for font in sorted((katex / "fonts").glob("*.woff2")):  # what Chromium picks first
            _write(tmp / "katex/fonts" / font.name, font.read_bytes())
        made = items(tmp)
        index, words = finish()
        chunks = (len(words) + SEARCH_CHUNK - 1) // SEARCH_CHUNK
        _write(tmp / "data/index.js", script("index", {**index, "search_chunks": chunks,
                                                       "search_chunk": SEARCH_CHUNK}))
        for c in range(chunks):
            _write(tmp / f"data/search/{c:03d}.js",  # compressed: items share their words
                   script("search", c,
                          blob=encode(words[c * SEARCH_CHUNK:(c + 1) * SEARCH_CHUNK])))
        for path in tmp.rglob("*"):  # readable by a static host, whatever mkdtemp chose
            path.chmod(0o755 if path.is_dir() else 0o644)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return {**made, "files": sum(1 for p in out.rglob("*") if p.is_file()), "bytes": size}


__all__ = ["VENDOR", "katex_dir", "script", "vendor_files", "write_item", "write_items_here",
           "write_site", "write_stream", "write_with"]
