"""Prompt templates (files in ``rimo_eval/prompts``) rendered into chat messages.

Templates use ``{{name}}`` placeholders, substituted in a single pass so that text inside a
problem (LaTeX braces, a literal ``{{index}}``) is never re-interpreted. Shared by the RIMO
prompts (``rimo_eval.predictors.prompting``) and the judge's.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from rimo_eval.errors import StageError

Message = dict[str, str]

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@cache
def template_bytes(name: str) -> bytes:
    try:
        return (resources.files("rimo_eval") / "prompts" / name).read_bytes()
    except FileNotFoundError as exc:
        raise StageError(f"prompt template rimo_eval/prompts/{name} not found") from exc


def load_template(name: str) -> str:
    return template_bytes(name).decode("utf-8")


def render(template: str, **values: object) -> str:
    def substitute(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise StageError(f"prompt template placeholder {{{{{m.group(1)}}}}} has no value")
        return str(values[m.group(1)])

    return _PLACEHOLDER.sub(substitute, template).strip()


def to_messages(user: str, system_prompt: str | None = None) -> list[Message]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*messages, {"role": "user", "content": user}]
