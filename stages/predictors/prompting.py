"""Prompt templates (files in ``stages/prompts``) rendered into chat messages.

Templates use ``{{name}}`` placeholders, substituted in a single pass so that text inside a
problem (LaTeX braces, a literal ``{{index}}``) is never re-interpreted. Their sha256 digests
are part of the predictor fingerprint: editing a template changes the fingerprint and, because
the rendered messages change, misses the response cache.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib import resources

from stages.core.errors import StageError
from stages.core.hashing import sha256_bytes
from stages.core.items import Item

RIMO_N = "rimo_n.txt"
RIMO_P_SINGLE = "rimo_p_single.txt"  # a one-part RIMO-P item: its sub-problem is the problem
RIMO_P_PART = "rimo_p_part.txt"  # part k of a multi-part item
RIMO_P_PROVED = "rimo_p_proved.txt"  # one earlier part with the model's own proof, as a fact
TEMPLATES = (RIMO_N, RIMO_P_SINGLE, RIMO_P_PART, RIMO_P_PROVED)

Message = dict[str, str]

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@cache
def _template_bytes(name: str) -> bytes:
    try:
        return (resources.files("stages") / "prompts" / name).read_bytes()
    except FileNotFoundError as exc:
        raise StageError(f"prompt template stages/prompts/{name} not found") from exc


def load_template(name: str) -> str:
    return _template_bytes(name).decode("utf-8")


def template_hashes() -> dict[str, str]:
    """sha256 of every template file, for the fingerprint."""
    return {name: sha256_bytes(_template_bytes(name)) for name in TEMPLATES}


def render(template: str, **values: object) -> str:
    def substitute(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise StageError(f"prompt template placeholder {{{{{m.group(1)}}}}} has no value")
        return str(values[m.group(1)])

    return _PLACEHOLDER.sub(substitute, template).strip()


def to_messages(user: str, system_prompt: str | None = None) -> list[Message]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*messages, {"role": "user", "content": user}]


def rimo_n_messages(item: Item, system_prompt: str | None = None) -> list[Message]:
    return to_messages(render(load_template(RIMO_N), problem=item.problem.strip()), system_prompt)


def rimo_p_messages(item: Item, index: int, proved: Sequence[str],
                    system_prompt: str | None = None) -> list[Message]:
    """Messages for sub-problem ``index`` (0-based) given the model's proofs of parts 0..index-1.

    The paper's protocol: the problem, then every earlier sub-problem with the model's own
    solution presented as already proved, then the current sub-problem.
    """
    if len(proved) != index:
        raise ValueError(f"part {index} needs {index} earlier solutions, got {len(proved)}")
    parts = item.sub_problems
    if len(parts) == 1:
        user = render(load_template(RIMO_P_SINGLE), problem=item.problem.strip())
        return to_messages(user, system_prompt)
    earlier = "\n\n".join(
        render(load_template(RIMO_P_PROVED), index=k + 1, sub_problem=parts[k].strip(),
               solution=proved[k].strip())
        for k in range(index)
    )
    user = render(load_template(RIMO_P_PART), problem=item.problem.strip(),
                  proved=f"\n{earlier}\n" if earlier else "", index=index + 1,
                  number_of_parts=len(parts), sub_problem=parts[index].strip())
    return to_messages(user, system_prompt)
