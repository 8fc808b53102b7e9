"""What the native APIs' translations share: chat messages for APIs with no system role
(Anthropic's Messages, Gemini's contents)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def split_system(system_prompt: str | None, messages: Sequence[Mapping[str, str]]
                 ) -> tuple[str | None, list[tuple[str, str]]]:
    """The system text (``system_prompt``, then every system message, joined by a blank line;
    None if there is none) and the user/assistant turns as (role, content) in order."""
    system = [system_prompt] if system_prompt else []
    turns: list[tuple[str, str]] = []
    for m in messages:
        role, content = m["role"], m["content"]
        if role == "system":
            system.append(content)
        elif role in ("user", "assistant"):
            turns.append((role, content))
        else:
            raise ValueError(f"unknown chat role {role!r}")
    return ("\n\n".join(system) if system else None), turns

