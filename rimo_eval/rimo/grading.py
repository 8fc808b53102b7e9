"""The graders, exactly as the benchmark defines them: plain functions on one item."""

from __future__ import annotations

from collections.abc import Sequence


def grade_n(prediction: str | None, gold: str) -> bool:
    """RIMO-N: exact match after strip; no other normalisation; no prediction is wrong."""
    return prediction is not None and prediction.strip() == gold.strip()


def match_parts(prediction: Sequence[str] | None, gold: Sequence[str]) -> list[bool]:
    """RIMO-P: for each reference sub-solution, whether the same-position entry equals it."""
    pred = list(prediction or [])
    return [k < len(pred) and pred[k].strip() == ref.strip() for k, ref in enumerate(gold)]


def leading_matches(matched: Sequence[bool]) -> int:
    """S_i of the paper: how many parts, from the first, are matched without a gap."""
    count = 0
    for ok in matched:
        if not ok:
            break
        count += 1
    return count


def grade_p_strict(prediction: Sequence[str] | None, gold: Sequence[str]) -> bool:
    """Exactly ``len(gold)`` entries, each matching. Unlike ``all(zip(...))``, an empty or short
    prediction cannot pass, and an item with no parts is never strictly correct."""
    pred = list(prediction or [])
    return len(gold) > 0 and len(pred) == len(gold) and all(match_parts(pred, gold))
