"""The judge's request for one sub-solution, built from ``rimo_eval/prompts/judge_rimo_p.txt``."""

from __future__ import annotations

from collections.abc import Sequence

from rimo_eval.io.hashing import sha256_bytes
from rimo_eval.rimo.prompt_templates import Message, load_template, render, to_messages

TEMPLATE = "judge_rimo_p.txt"
# Parts of the official solution are joined with a blank line, in order (docs/concepts.md, judge:
# upstream's judge reads a `solution` column that RIMO-P.csv does not have).
PART_SEPARATOR = "\n\n"


def template_sha256() -> str:
    return sha256_bytes(load_template(TEMPLATE).encode("utf-8"))


def official_solution(sub_solutions: Sequence[str]) -> str:
    """The "official complete solution": the item's reference sub-solutions 1..n in order."""
    return PART_SEPARATOR.join(s.strip() for s in sub_solutions)


def judge_messages(problem: str, sub_solutions: Sequence[str], index: int, candidate: str,
                   system_prompt: str | None) -> list[Message]:
    """Messages judging ``candidate`` as the solution of sub-problem ``index`` (0-based)."""
    user = render(load_template(TEMPLATE), problem=problem.strip(),
                  official_solution=official_solution(sub_solutions),
                  candidate=candidate.strip(), index=index + 1,
                  number_of_parts=len(sub_solutions))
    return to_messages(user, system_prompt)
