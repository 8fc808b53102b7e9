"""Text that every file can hold. Model text is arbitrary; UTF-8 is not.

A server may send the JSON escape ``\\ud800`` (or bytes that are not UTF-8), which Python
decodes into a lone UTF-16 surrogate: a ``str`` that no UTF-8 encoder accepts, so the response
cache, the fingerprint of the next RIMO-P prompt quoting it, Parquet and every JSON artifact
would fail on it. ``valid_text`` makes such a text valid once, where it enters the engine
(``stages.chat.transport.ChatReply``): each lone surrogate becomes U+FFFD (a high and a low
surrogate side by side, in that order, are the one character they encode), and the caller
flags the reply ``unicode_repaired`` (``stages.core.reply_flags``). Everything else is valid
Unicode and is kept as it is: NUL, C0 and C1 controls, bidi and zero-width controls,
noncharacters.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"


def is_valid(text: str) -> bool:
    """``text`` encodes as UTF-8 (holds no lone surrogate)."""
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


def lone_surrogate(value: str | list[str] | None) -> tuple[str, int] | None:
    """The first unpaired UTF-16 surrogate of a text (a string or a list of them) and its
    index, which no UTF-8 file can hold; None when every text encodes."""
    for text in [value] if isinstance(value, str) else value or []:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return text[exc.start], exc.start
    return None
