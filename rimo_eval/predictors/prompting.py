"""The RIMO prompts: RIMO-N and RIMO-P part templates rendered into chat messages.

Rendering is ``rimo_eval.rimo.prompt_templates`` (also the judge's). The templates' sha256 digests
are part of the predictor fingerprint: editing a template changes the fingerprint and, because
the rendered messages change, misses the response cache.
"""

from __future__ import annotations

from collections.abc import Sequence

from rimo_eval.artifacts.items import Item
from rimo_eval.io.hashing import sha256_bytes
from rimo_eval.rimo.prompt_templates import (
    Message,
    load_template,
    render,
    template_bytes,
    to_messages,
)

RIMO_N = "rimo_n.txt"
RIMO_P_SINGLE = "rimo_p_single.txt"  # a one-part RIMO-P item: its sub-problem is the problem
RIMO_P_PART = "rimo_p_part.txt"  # part k of a multi-part item
RIMO_P_PROVED = "rimo_p_proved.txt"  # one earlier part with the model's own proof, as a fact
TEMPLATES = (RIMO_N, RIMO_P_SINGLE, RIMO_P_PART, RIMO_P_PROVED)

def template_hashes() -> dict[str, str]:
    """sha256 of every template file, for the fingerprint."""
    return {name: sha256_bytes(template_bytes(name)) for name in TEMPLATES}


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
