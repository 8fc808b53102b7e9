"""The RIMO-N answer extractor: the content of the last ``\\boxed{...}`` with balanced braces.

Rules (kept deliberately small, since RIMO-N is scored by exact string match):

* ``\\boxed`` may be followed by whitespace before its ``{`` (``\\boxed {7}``, ``\\boxed\\n{7}``);
  ``\\boxedfoo{...}`` and a brace-less ``\\boxed 7`` are not boxes.
* Braces are counted naively: every ``{`` opens and every ``}`` closes, ``\\{`` included (it
  pairs with ``\\}`` anyway in ``\\boxed{\\{1,2\\}}``).
* A box whose braces never close (a truncated reply) is skipped; a box nested inside another
  box belongs to the outer one, so ``\\boxed{\\boxed{3}}`` gives ``\\boxed{3}``.
* The content is stripped of surrounding whitespace; nothing else is normalised.

``extract_boxed`` returns ``None`` when there is no balanced box. It runs in linear time, so an
adversarial reply (thousands of unclosed boxes) cannot stall the stage.
"""

from __future__ import annotations

import re

VERSION = "last-balanced-boxed-v1"  # part of the predictor fingerprint: bump on any rule change

_BOX = re.compile(r"\\boxed\s*\{")


def _matching_braces(text: str) -> dict[int, int]:
    """Map the index of each ``{`` to the index of the ``}`` that closes it (when one does)."""
    match: dict[int, int] = {}
    stack: list[int] = []
    for i, ch in enumerate(text):
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            match[stack.pop()] = i
    return match


def extract_boxed(text: str | None) -> str | None:
    """The stripped content of the last top-level balanced ``\\boxed{...}``, or ``None``."""
    if not text or "boxed" not in text:
        return None
    match = _matching_braces(text)
    found: str | None = None
    resume = 0  # boxes starting before this index lie inside the last accepted box
    for m in _BOX.finditer(text):
        if m.start() < resume:
            continue
        opening = m.end() - 1
        closing = match.get(opening)
        if closing is None:
            continue
        found = text[opening + 1 : closing]
        resume = closing + 1
    return None if found is None else found.strip()
