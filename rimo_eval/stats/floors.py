"""RIMO-N's floor: what a constant answer scores on the items evaluated, and the answer types.

73 of RIMO-N's 335 gold answers are "1" and 23 are "0", so a model that always answers "1"
scores 21.8%: a run's accuracy means little without it. Both are context beside the metric,
never the metric (breakdown.json ``RIMO-N.baselines`` and ``RIMO-N.by_answer_type``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rimo_eval.artifacts.numbers import pct
from rimo_eval.rimo.grading import grade_n
from rimo_eval.stats.proportions import ratio

DECISION = "0/1"  # gold 0 or 1: a wrong answer there is mostly the other value
OTHER = "other"
ANSWER_TYPES = (DECISION, OTHER)


def answer_type(gold: str) -> str:
    return DECISION if gold.strip() in ("0", "1") else OTHER


def _order(answer: str) -> tuple[int, int, str]:
    """Ties between constants go to the smaller integer, then (a non-integer) the string."""
    try:
        return (0, int(answer), answer)
    except ValueError:
        return (1, 0, answer)


def best_constant(golds: Iterable[str]) -> dict[str, Any]:
    """The constant answer with the most exact matches (RIMO-N's own grader) on these golds:
    ``{"answer", "accuracy", "n"}``; ties go to the smaller integer (``_order``), so the same
    items always give the same answer. No items: answer and accuracy null."""
    golds = list(golds)
    # Only a gold answer can match one; each is scored by the grader, not assumed to.
    right = {c: sum(grade_n(c, g) for g in golds) for c in {g.strip() for g in golds}}
    if not right:
        return {"answer": None, "accuracy": None, "n": 0}
    answer = min(right, key=lambda c: (-right[c], *_order(c)))
    return {"answer": answer, "accuracy": ratio(right[answer], len(golds)), "n": len(golds)}


def floor_line(track: str, accuracy: Any, baselines: Mapping[str, Any] | None) -> str:
    """'RIMO-N 35.8% (a constant "1" scores 21.8% on these items)'; the accuracy alone where
    the run has no floor (scores from before it)."""
    best = (baselines or {}).get("best_constant") or {}
    head = f"{track} {pct(accuracy)}"
    if best.get("answer") is None:
        return head
    return f'{head} (a constant "{best["answer"]}" scores {pct(best["accuracy"])} on these items)'


__all__ = ["ANSWER_TYPES", "DECISION", "OTHER", "answer_type", "best_constant", "floor_line"]
