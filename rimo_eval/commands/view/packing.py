"""An item's texts, shipped once and compressed: the page renders them when they are opened.

The payload of an item (model.py) holds each text as a ``Text`` (a str that remembers whether it
is shown as source). ``pack`` replaces each one by ``{"t": i}`` (``"src": 1`` for source, and
``"fixed": n`` when n lone surrogates had to become U+FFFD: UTF-8 cannot carry them, and the
page says so), and returns the item's distinct texts as one Zstandard frame of the UTF-8 JSON
array, base64: the page decodes it with fzstd (pinned in package-lock.json), then
``JSON.parse`` (never eval). One frame per item, not per text: the k samples of an item share
their words, so they compress together far better (and nothing is paid per text but its bytes).

Markdown and math are rendered in the page (text.js: markdown-it with raw HTML off, then
DOMPurify), only when a text is shown, never at build time: a k = 64 reasoning run is 3.4 GB of
text, most of which nobody opens.

The bytes are deterministic: a fixed level, one thread, the pinned zstandard (and its libzstd),
no time in them.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
import zstandard

from rimo_eval.io.surrogates import valid_text

# Zstandard level 3. Raw deflate (decoded natively by the page) was the first choice, but
# at the half-the-text size only zlib-ng level 4 fits (0.47 of the text, base64 in), at 56 MB/s
# a core: 57 s of CPU for a k = 64 reasoning run's 3.2 GB. On the benchmark's k = 16 and 64
# reasoning items (base64 in), level 3 gives 0.45 at 130-170 MB/s, level 2 0.48 at about
# 190 MB/s (the site would then sit at half the text); ISA-L deflate 0.53 at 318 MB/s.
# benchmarks/README.md has the build figures.
LEVEL = 3


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


_NESTED = (Text, dict, list, tuple)  # what pack's walk goes into


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
        # Scalars are most of a payload's values: taken as they are, without a call each.
        if isinstance(value, dict):
            return {k: walk(v) if isinstance(v, _NESTED) else v for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v) if isinstance(v, _NESTED) else v for v in value]
        return value

    packed = walk(payload)
    if not texts:
        return packed, ""
    return packed, encode(texts)


def encode(texts: list[str]) -> str:
    """The base64 of one Zstandard frame of ``texts`` as a UTF-8 JSON array (valid text only)."""
    # orjson: the standard library's encoder runs at ~100 MB/s on long texts, most of the
    # build's time after compression (cProfile, k = 16 reasoning); the texts are valid UTF-8
    # here (``_lone``), so it never refuses one.
    raw = orjson.dumps(texts)
    # A compressor per call: it is not thread-safe, and costs little beside an item's text.
    frame = zstandard.ZstdCompressor(level=LEVEL, write_checksum=False, write_content_size=True,
                                     threads=0).compress(raw)
    return base64.b64encode(frame).decode("ascii")


def decode(blob: str) -> list[str]:
    """``encode``'s inverse (tests and tools; the page has its own)."""
    if not blob:
        return []
    raw = zstandard.ZstdDecompressor().decompress(base64.b64decode(blob))
    texts: list[str] = json.loads(raw.decode("utf-8"))
    return texts


__all__ = ["LEVEL", "Text", "decode", "encode", "pack", "source", "text"]
