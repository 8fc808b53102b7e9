"""The one scanner of ``\\boxed{...}`` answers, shared by predict's extractor and score's
diagnostics (so the two can never read a reply differently).

Rules (kept deliberately small, since RIMO-N is scored by exact string match):

* ``\\boxed`` may be followed by whitespace before its ``{`` (``\\boxed {7}``, ``\\boxed\\n{7}``);
  ``\\boxedfoo{...}`` and a brace-less ``\\boxed 7`` are not boxes.
* Braces are counted naively: every ``{`` opens and every ``}`` closes, ``\\{`` included (it
  pairs with ``\\}`` anyway in ``\\boxed{\\{1,2\\}}``).
* A box whose braces never close (a truncated reply) is skipped; a box nested inside another
  box belongs to the outer one, so ``\\boxed{\\boxed{3}}`` is one box holding ``\\boxed{3}``.
* Each content is stripped of surrounding whitespace; nothing else is normalised.

Linear time, so an adversarial reply (thousands of unclosed boxes) cannot stall a stage.
"""

from __future__ import annotations

import re

_BOX = re.compile(r"\\boxed\s*\{")
_BRACES = re.compile(r"[{}]")


def _matching_braces(text: str) -> dict[int, int]:
    """Map the index of each ``{`` to the index of the ``}`` that closes it (when one does).
    Only the braces are visited (a regex finds them), not every character of a long reply."""
    match: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACES.finditer(text):
        i = m.start()
        if text[i] == "{":
            stack.append(i)
        elif stack:
            match[stack.pop()] = i
    return match


def boxes(text: str | None) -> list[str]:
    """The stripped contents of every top-level balanced ``\\boxed{...}``, in order."""
    if not text or "boxed" not in text:
        return []
    match = _matching_braces(text)
    found: list[str] = []
    resume = 0  # boxes starting before this index lie inside the last accepted box
    for m in _BOX.finditer(text):
        if m.start() < resume:
            continue
        opening = m.end() - 1
        closing = match.get(opening)
        if closing is None:
            continue
        found.append(text[opening + 1 : closing].strip())
        resume = closing + 1
    return found


__all__ = ["boxes"]
