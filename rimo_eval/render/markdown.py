"""The one Markdown table cell that every command's Markdown output escapes its text with."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any


def md_cell(text: Any) -> str:
    """A Markdown table cell: no raw HTML, pipes or line breaks from ids, labels or models."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def md_row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"
