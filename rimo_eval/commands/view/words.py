"""An item's search words: the distinct lower-case words of its problem and every answer (and,
with ``--search-reasoning``, every reasoning), which the page matches a query against by
substring."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

WORD = re.compile(r"[^\W_]+", re.UNICODE)
# An ASCII text's word characters kept, every other byte a space (WORD, for ASCII).
_ASCII_WORD = bytes(c if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))


def search_text(raw: Iterable[str]) -> str:
    """The distinct words of ``raw``, lower case, sorted, space-separated."""
    words: set[str] = set()
    ascii_words: set[bytes] = set()
    for text in dict.fromkeys(raw):  # k samples often repeat a text: each is read once
        if text.isascii():  # WORD is [A-Za-z0-9]+ there: 3x faster as bytes
            ascii_words.update(text.lower().encode("ascii").translate(_ASCII_WORD).split())
        else:
            words.update(WORD.findall(text.lower()))
    if not words:  # all ASCII (nearly always): one decode, not one per word
        return b" ".join(sorted(ascii_words)).decode("ascii")
    words.update(w.decode("ascii") for w in ascii_words)
    return " ".join(sorted(words))


def reasonings(details: dict[str, Any]) -> list[str]:
    """A sample's reasoning texts: RIMO-N's, or each RIMO-P part's ('' where none)."""
    parts = details.get("parts")
    found = [details.get("reasoning")]
    if isinstance(parts, list):
        found += [p.get("reasoning") for p in parts if isinstance(p, dict)]
    return [x if isinstance(x, str) else "" for x in found]


__all__ = ["WORD", "reasonings", "search_text"]
