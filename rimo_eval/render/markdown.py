"""The one Markdown table cell that every command's Markdown output escapes its text with."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# What CommonMark reads as markup in text: a "<" that opens a tag or an autolink, a "&" that
# starts an entity. Only those are escaped: the same Markdown is what the terminal shows, where
# "&lt;=1989" or "k &gt; 1" would be noise (issue 43).
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def md_cell(text: Any) -> str:
    """A Markdown table cell: no raw HTML, pipes or line breaks from ids, labels or models;
    every other character as it is (``<=1989``, ``k > 1``)."""
    cell = _TAG_OPEN.sub("&lt;", _ENTITY.sub("&amp;", str(text)))
    return cell.replace("|", "\\|").replace("\n", " ")


def md_row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"
