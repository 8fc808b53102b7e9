"""Text for a terminal: the one place where what a server or a model wrote is made safe to print.

An error message can quote a server's error text, and that text can hold terminal controls:
ESC sequences that retitle the window, clear the screen or move the cursor, a carriage return
that overwrites the line it is on, C1 controls that some terminals act on as ESC sequences,
and bidi overrides that display text in another order than it is. ``for_terminal`` writes each
such character as a visible escape (``\\x1b``, ``\\r``, ``\\u202e``): nothing acts on the
terminal, and what the server sent can still be read. Newline and tab are kept (messages span
lines). Every error and warning printed from server or model text goes through it; artifacts
keep the text as it was (they are not a terminal). ``json_for_terminal`` is the same for a
command's ``--json`` output: json.dumps escapes C0 itself, but not C1 or the bidi controls
(``ensure_ascii=False``); they become ``\\u`` escapes, which a JSON reader reads back as the
same characters.
"""

from __future__ import annotations

import re

# C0 except tab and newline, DEL, C1, and the bidi embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: object) -> str:
    """``str(text)`` with every character that could act on a terminal written as an escape."""
    return _UNSAFE.sub(_escape, str(text))


def json_for_terminal(text: str) -> str:
    """JSON text (``json.dumps``) with every such character as a JSON ``\\uXXXX`` escape: the
    document reads back the same, and nothing acts on the terminal."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
