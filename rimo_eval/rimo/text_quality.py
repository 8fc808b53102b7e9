"""Data-quality checks of stored item text: what validate reports as warnings
(reports/validation.json) and what ``rimo-eval view`` marks on an item's page.

Both come from how the upstream files were written, not from the benchmark's rules, so they
never block a run: the items are kept as upstream has them (the paper's protocol; docs/concepts.md,
"Upstream text as the model sees it").
"""

from __future__ import annotations

import re

# Findings that never block, with what they mean (validate lists the rules in its report).
WARNING_RULES: dict[str, str] = {
    "text.control_char": "a control character in stored text (often a mangled LaTeX escape)",
    "text.double_backslash": "a doubled backslash before a command name ('\\\\ldots' for "
                             "'\\ldots'): LaTeX escaped twice, which renders as a line break",
}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # all but TAB and LF
# An even run of backslashes right before a letter: LaTeX reads '\\ldots' as a line break and
# the letters 'ldots'. '\\\hline' (a break, then \hline) is an odd run and is not matched.
_DOUBLED = re.compile(r"(?<!\\)(?:\\\\)+(?=[A-Za-z])")
_COMMAND = re.compile(r"[A-Za-z]+")
_CONTEXT = 12  # characters either side of the first occurrence, in a message
_EXAMPLES = 3  # distinct commands named in a message


def _around(text: str, at: int) -> str:
    return repr(text[max(at - _CONTEXT, 0):at + _CONTEXT])


def control_chars(text: str) -> str | None:
    """Control characters left after normalisation, with the first one in context: in this
    data they come from LaTeX written unescaped in JSON ('\\frac' read as form feed + 'rac')."""
    found = list(_CONTROL.finditer(text))
    if not found:
        return None
    codes = sorted({f"U+{ord(m.group()):04X}" for m in found})
    return f"{', '.join(codes)} ({len(found)}x), first at {_around(text, found[0].start())}"


def doubled_backslashes(text: str) -> str | None:
    """Commands written with a doubled backslash, the most frequent named, first in context."""
    found = list(_DOUBLED.finditer(text))
    if not found:
        return None
    counts: dict[str, int] = {}
    for m in found:
        name = "\\\\" + _COMMAND.match(text, m.end()).group()  # type: ignore[union-attr]
        counts[name] = counts.get(name, 0) + 1
    common = sorted(counts, key=lambda c: (-counts[c], c))[:_EXAMPLES]
    return (f"{len(found)}x ({', '.join(common)}{', ...' if len(counts) > _EXAMPLES else ''})"
            f", first at {_around(text, found[0].start())}")


CHECKS = {"text.control_char": control_chars, "text.double_backslash": doubled_backslashes}


def text_warnings(text: str) -> list[tuple[str, str]]:
    """(rule, message) for every check ``text`` fails, in rule order."""
    out = []
    for rule, check in CHECKS.items():
        message = check(text)
        if message is not None:
            out.append((rule, message))
    return out


__all__ = ["CHECKS", "WARNING_RULES", "control_chars", "doubled_backslashes", "text_warnings"]
