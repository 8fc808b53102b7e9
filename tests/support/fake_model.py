"""The fake model the native full runs serve: a gold answer for most items and a wrong one for the
rest, fixed by the item's id."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rimo_eval.artifacts.items import load_items
from rimo_eval.predictors.prompting import rimo_n_messages, rimo_p_messages
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P


def _bucket(pid: str, n: int) -> int:
    return int(hashlib.sha256(pid.encode()).hexdigest(), 16) % n


def fake_model(items_dir: Path) -> dict[str, str]:
    """Last user message -> reply, for every request a full run makes."""
    replies: dict[str, str] = {}
    for item in load_items(TRACK_N, items_dir):
        text = (f"Carefully, the answer is \\boxed{{{item.answer}}}." if _bucket(item.problem_id, 3)
                else f"I could not finish {item.problem_id}.")
        replies[rimo_n_messages(item)[-1]["content"]] = text
    for item in load_items(TRACK_P, items_dir):
        good = _bucket(item.problem_id, 2) == 0
        proved: list[str] = []
        for k in range(len(item.sub_problems)):
            text = (item.sub_solutions[k] if good and item.sub_solutions[k].strip()
                    else f"An attempt at part {k + 1} of {item.problem_id}.")
            replies[rimo_p_messages(item, k, proved)[-1]["content"]] = text
            proved.append(text.strip())
    return replies
