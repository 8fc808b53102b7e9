"""Lone UTF-16 surrogates: code points that a JSON or YAML ``\\ud800`` escape decodes to, but
that no UTF-8 file, HTTP request or Arrow table can hold."""

from __future__ import annotations

from typing import Any


def first_lone_surrogate(text: str) -> tuple[str, int] | None:
    """The first lone surrogate of ``text`` and its index; None when it all encodes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return text[exc.start], exc.start
    return None


def escaped(text: Any) -> str:
    """``str(text)`` with each lone surrogate written as ``\\udxxx``: safe in any message."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")


def split_pair(text: str, index: int) -> str | None:
    """The character a high surrogate at ``index`` and the low one after it stand for, written
    as YAML and Python write it (``\\U0001F600``); None when they are not such a pair."""
    hi = ord(text[index])
    lo = ord(text[index + 1]) if index + 1 < len(text) else 0
    if not (0xD800 <= hi <= 0xDBFF and 0xDC00 <= lo <= 0xDFFF):
        return None
    return f"\\U{0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00):08X}"
