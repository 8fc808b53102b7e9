"""Reasoning apart from the answer: the server's reasoning field (``reasoning_content`` /
``reasoning``) and a leading ``<think>...</think>`` block of the content (reasoning models
served without a reasoning parser). Only the rest is ever read for an answer or a verdict.
"""

from __future__ import annotations

from rimo_eval.chat.transport import ChatReply
from rimo_eval.params.chat import ThinkSplit


def split_reply(reply: ChatReply, think: ThinkSplit | None) -> tuple[str | None, str]:
    """``(reasoning, answer text)`` of a reply's first choice: the server's reasoning field and
    any leading think block are reasoning; only the rest is ever read for an answer."""
    content = reply.texts[0]
    server_reasoning = reply.reasoning[0] if reply.reasoning else None
    thoughts, text = (split_think(content, think.open, think.close)
                      if think is not None and think.enabled else (None, content))
    return "\n\n".join(r for r in (server_reasoning, thoughts) if r) or None, text


def split_think(text: str, open_tag: str, close_tag: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` of a reply that starts with a ``<think>…</think>`` block.

    As the upstream Qwen3 script does, everything up to the *last* close tag is reasoning (chat
    templates that pre-fill the open tag leave only the close tag in the reply). A reply that
    opens a block and never closes it (cut off while thinking) is all reasoning: its answer is
    empty, so a guessed ``\\boxed{}`` inside the thoughts is never taken. Otherwise the reply is
    all answer, reasoning ``None``.
    """
    head = text.lstrip()
    cut = text.rfind(close_tag)
    if cut >= 0 and (head.startswith(open_tag) or open_tag not in text[:cut]):
        thoughts = text[:cut].lstrip()
        if thoughts.startswith(open_tag):
            thoughts = thoughts[len(open_tag):]
        return thoughts.strip(), text[cut + len(close_tag):].strip()
    if head.startswith(open_tag):
        return head[len(open_tag):].strip(), ""
    return None, text
