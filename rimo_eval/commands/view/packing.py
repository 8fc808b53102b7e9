"""An item's texts, shipped once and compressed: the page renders them when they are opened.

The payload of an item (model.py) holds each text as a ``Text`` (a str that remembers whether it
is shown as source). ``pack`` replaces each one by ``{"t": i}`` (``"src": 1`` for source, and
``"fixed": n`` when n lone surrogates had to become U+FFFD: UTF-8 cannot carry them, and the
page says so), and returns the item's distinct texts as one raw-deflate stream of the UTF-8 JSON
array, base64: the page decodes it with ``DecompressionStream("deflate-raw")``, then
``JSON.parse`` (never eval). One stream per item, not per text: the k samples of an item share
their words, so they compress together far better (and nothing is paid per text but its bytes).

Markdown and math are rendered in the page (text.js: markdown-it with raw HTML off, then
DOMPurify), only when a text is shown, never at build time: a k = 64 reasoning run is 3.4 GB of
text, most of which nobody opens.

The bytes are deterministic: a fixed level and strategy (zlib-ng, pinned), no header, no time
in them.
"""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from zlib_ng import zlib_ng

from rimo_eval.core.surrogates import valid_text

# zlib-ng level 4: on 15 items' k = 16 reasoning texts here (base64 included) it gave 0.467 of
# the text at 12-13 MB/s, level 3 0.486 at 17-19 MB/s (the site then went over half the text);
# zlib 0.49 at 10 MB/s (level 5), 0.47 at 4 MB/s (level 6); ISA-L 0.53 at 300 MB/s. All under
# a load average of 4-6 on 2 cores. The same input, level and zlib-ng release (pinned) give
# the same bytes (tests/unit/test_view_site.py rebuilds a site byte for byte); any inflate
# reads them.
LEVEL = 4


class Text(str):
    """A text the page shows: rendered as Markdown with math, or as its source (``source``)."""

    source: bool = False


def text(value: str | None) -> Text | None:
    """``value`` as a text to render, None for no text (or an empty one)."""
    return Text(value) if value else None


def source(value: str) -> Text:
    """``value`` shown as the model received it: escaped source, no Markdown or math."""
    out = Text(value)
    out.source = True
    return out


def _lone(value: str) -> tuple[str, int]:
    fixed, repaired = valid_text(value)
    if not repaired:
        return value, 0
    # A high and a low surrogate side by side are the one character they encode: no repair.
    return fixed, fixed.count("\ufffd") - value.count("\ufffd")


def pack(payload: Any) -> tuple[Any, str]:
    """``payload`` with each ``Text`` replaced by its reference, and the base64 of the
    compressed JSON array of the distinct texts ('' when there are none)."""
    texts: list[str] = []
    seen: dict[str, int] = {}

    def ref(value: Text) -> dict[str, Any]:
        fixed, count = _lone(str(value))
        i = seen.get(fixed)
        if i is None:
            i = seen[fixed] = len(texts)
            texts.append(fixed)
        out: dict[str, Any] = {"t": i}
        if value.source:
            out["src"] = 1
        if count:
            out["fixed"] = count
        return out

    def walk(value: Any) -> Any:
        if isinstance(value, Text):
            return ref(value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v) for v in value]
        return value

    packed = walk(payload)
    if not texts:
        return packed, ""
    return packed, encode(texts)


def encode(texts: list[str]) -> str:
    """The base64 of the raw deflate of ``texts`` as a UTF-8 JSON array (valid text only)."""
    raw = json.dumps(texts, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    deflate = zlib_ng.compressobj(LEVEL, zlib_ng.DEFLATED, -15, 9, zlib_ng.Z_DEFAULT_STRATEGY)
    return base64.b64encode(deflate.compress(raw) + deflate.flush()).decode("ascii")


def decode(blob: str) -> list[str]:
    """``encode``'s inverse (tests and tools; the page has its own)."""
    if not blob:
        return []
    raw = zlib.decompress(base64.b64decode(blob), -15)
    texts: list[str] = json.loads(raw.decode("utf-8"))
    return texts


__all__ = ["LEVEL", "Text", "decode", "encode", "pack", "source", "text"]
