"""The judge's single link to the chat engine (``rimo_eval.chat``): settings and calls.

Everything the ``openai`` backend does for a request is reused as it is: the transport (retries
with jitter, fatal 401/403/404, key redaction), the content-addressed response cache (resume after
``kill -9``: an answered request is never sent again), single flight, the concurrency limit and
the progress bar, the think split of reasoning models (only the answer after a ``<think>`` block,
or apart from the server's reasoning field, is parsed for a verdict). Only this module touches
the engine, and only through its public API (``Session``, ``OpenAITransport``,
``split_reply``), so re-pointing the judge at a changed engine is an edit here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rimo_eval.chat.openai.transport import OpenAITransport
from rimo_eval.chat.reasoning import split_reply
from rimo_eval.chat.session import Session, run_sync
from rimo_eval.chat.transport import TransportError
from rimo_eval.errors import ConfigError
from rimo_eval.params.config import JudgeParams
from rimo_eval.params.effects import identity
from rimo_eval.rimo.prompt_templates import Message


def check(cfg: JudgeParams) -> None:
    """What only a judge that runs needs: a model to send to."""
    if not cfg.model:
        raise ConfigError("params.yaml: judge.model must name the served model")


@dataclass(frozen=True)
class Answer:
    """One judge call: the answer text (think block split off) and the whole reply, or the
    error that ended it after its retries."""

    text: str | None
    raw_text: str | None
    request_sha256: str | None
    model: str | None
    error: str | None


def endpoint_identity(cfg: JudgeParams) -> dict[str, Any]:
    """What answers the judge's requests, for the fingerprint: the fields marked ``Result``
    (params/effects.py; no key, no operational knob, not the judge's own switches), each as the
    file set it, else its default."""
    return identity(cfg)


def ask_all(cfg: JudgeParams, conversations: Sequence[list[Message]],
            label: str = "judge") -> list[Answer]:
    """Send every conversation (cached ones are not sent), in order; one ``Answer`` each."""
    check(cfg)
    return run_sync(_ask_all(cfg, list(conversations), label))


async def _ask_all(cfg: JudgeParams, conversations: list[list[Message]], label: str
                   ) -> list[Answer]:
    session = Session(OpenAITransport(cfg, "judge"), cfg, label=label, section="judge",
                      total=len(conversations))
    errors = 0

    async def one(messages: list[Message]) -> Answer:
        nonlocal errors
        async with session.slot():
            try:
                reply, key = await session.call("judge", messages, 0)
            except TransportError as exc:
                session.skip(1)
                errors += 1
                return Answer(None, None, exc.request_sha256, None, str(exc))
        _reasoning, text = split_reply(reply, cfg.think_split)
        return Answer(text, reply.texts[0], key, reply.model, None)

    try:
        async with session:
            return await session.gather(one(m) for m in conversations)
    finally:
        print(f"{label}: {len(conversations)} parts, {sum(session.hits.values())} cached "
              f"replies, {sum(session.sent.values())} requests sent, {errors} failed for "
              f"good, {session.wall_s:.1f}s", file=sys.stderr)
