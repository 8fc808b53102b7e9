"""Lone UTF-16 surrogates: code points that a JSON or YAML ``\\ud800`` escape decodes to, but
that no UTF-8 file, HTTP request or Arrow table can hold.

Params and data files holding one are refused, naming where (``first_lone_surrogate``). Model
text is arbitrary, so a reply holding one is made valid instead, once, where it enters the
engine (``rimo_eval.chat.transport.ChatReply``, with ``valid_text``): each lone surrogate becomes
U+FFFD (a high and a low surrogate side by side, in that order, are the one character they
encode), and the reply is flagged ``unicode_repaired`` (``rimo_eval.chat.reply_flags``).
Everything else is valid Unicode and is kept as it is: NUL, C0 and C1 controls, bidi and
zero-width controls, noncharacters.
"""

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


def is_valid(text: str) -> bool:
    """``text`` holds no lone surrogate (it encodes as UTF-8)."""
    if text.isascii():  # O(1): CPython knows it of every string
        return True
    try:  # UTF-32 refuses surrogates as UTF-8 does, and encodes 40% faster here
        text.encode("utf-32-le")
    except UnicodeEncodeError:
        return False
    return True


def valid_text(text: str) -> tuple[str, bool]:
    """``(text with every lone surrogate replaced by U+FFFD, whether any was)``."""
    if is_valid(text):
        return text, False
    # UTF-16 holds surrogates as they are: a pair decodes to its character, and "replace"
    # turns each lone one (two bytes) into one U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace"), True


def valid_value(value: Any) -> tuple[Any, bool]:
    """``valid_text`` of every string in JSON-like data (dict keys too); other values as they
    are."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        out, changed = [], False
        for v in value:
            fixed, bad = valid_value(v)
            out.append(fixed)
            changed |= bad
        return (out, True) if changed else (value, False)
    if isinstance(value, dict):
        pairs, changed = [], False
        for k, v in value.items():
            fixed_k, bad_k = valid_value(k)
            fixed_v, bad_v = valid_value(v)
            pairs.append((fixed_k, fixed_v))
            changed |= bad_k or bad_v
        return (dict(pairs), True) if changed else (value, False)
    return value, False
