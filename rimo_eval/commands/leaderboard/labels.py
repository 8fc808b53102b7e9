"""Run labels on the leaderboard's figures: untrusted text (a replay path, a served model's
name), so ``$`` and ``\\`` are escaped (mathtext never parses a label) and long ones are cut.
Its own module so that both figures.py and years.py can use it without an import circle."""

from __future__ import annotations


def label(text: str, limit: int = 28) -> str:
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("$", r"\$")


__all__ = ["label"]
