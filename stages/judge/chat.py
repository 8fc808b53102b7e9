"""The judge's single link to the chat engine (``stages.predictors``): settings and calls.

Everything the ``openai`` backend does for a request is reused as it is: the transport (retries
with jitter, fatal 401/403/404, key redaction), the content-addressed response cache (resume after
``kill -9``: an answered request is never sent again), single flight, the concurrency limit and
the progress bar, the think split of reasoning models (only the answer after a ``<think>`` block,
or apart from the server's reasoning field, is parsed for a verdict). Only this module touches
the engine, and only through ``_Run.call`` and ``split_reply``, so re-pointing the judge at a
changed engine is an edit here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from stages.chat.openai.transport import OpenAITransport
from stages.chat.reasoning import split_reply
from stages.chat.session import Session, run_sync
from stages.chat.transport import ChatTransport, TransportError
from stages.core.config import ChatParams, JudgeParams, coerce
from stages.core.errors import ConfigError, StageError
from stages.predictors.openai_chat import OpenAIPredictor
from stages.predictors.prompting import Message

SYSTEM_PROMPT = "You are an expert mathematician and a strict judge of proofs."

# judge.* in params.yaml: the shared chat keys (core.config.ChatParams, with the openai
# backend's defaults), plus the judge's own. A verdict is one sample.
CHAT_DEFAULTS: dict[str, Any] = {
    **{k: OpenAIPredictor.defaults[k] for k in ChatParams.model_fields},
    "system_prompt": SYSTEM_PROMPT,
}
OWN_DEFAULTS: dict[str, Any] = {"enabled": False, "calibration": {"seed": 0, "limit": None}}
DEFAULTS = {**CHAT_DEFAULTS, **OWN_DEFAULTS}


def settings(cfg: JudgeParams | Mapping[str, Any] | None) -> dict[str, Any]:
    """``judge.*`` (typed, or a plain mapping checked here) merged over the defaults."""
    typed = coerce(JudgeParams, cfg.as_dict() if isinstance(cfg, JudgeParams) else cfg, "judge")
    merged = {**DEFAULTS, **typed.as_dict()}
    merged["calibration"] = {**OWN_DEFAULTS["calibration"], **merged["calibration"]}
    return merged


def _as_judge(exc: StageError) -> ConfigError:
    # The engine's messages name predict.openai (or predict.<name>); here the section is judge.
    text = str(exc).replace("predict.openai", "judge").replace("predict.judge", "judge")
    return ConfigError(text)


class _JudgeBackend(OpenAIPredictor):
    """The openai backend's checks and transport, with the judge's settings."""

    name = "judge"
    defaults: ClassVar[dict[str, Any]] = {**OpenAIPredictor.defaults, **CHAT_DEFAULTS}

    def __init__(self, config: dict[str, Any]) -> None:
        try:
            super().__init__(config)
        except StageError as exc:
            raise _as_judge(exc) from None

    def make_transport(self) -> ChatTransport:
        try:
            return OpenAITransport(self.settings)
        except StageError as exc:
            raise _as_judge(exc) from None


@dataclass(frozen=True)
class Answer:
    """One judge call: the answer text (think block split off) and the whole reply, or the
    error that ended it after its retries."""

    text: str | None
    raw_text: str | None
    request_sha256: str | None
    model: str | None
    error: str | None


def backend(cfg: Mapping[str, Any]) -> _JudgeBackend:
    chat = {k: v for k, v in cfg.items() if k in CHAT_DEFAULTS}
    return _JudgeBackend(chat)


def endpoint_identity(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What answers the judge's requests, for the fingerprint (no key, no operational knobs)."""
    b = backend(cfg)
    return dict(b.identity()["params"])


def ask_all(cfg: Mapping[str, Any], conversations: Sequence[list[Message]],
            label: str = "judge") -> list[Answer]:
    """Send every conversation (cached ones are not sent), in order; one ``Answer`` each."""
    return run_sync(_ask_all(backend(cfg), list(conversations), label))


async def _ask_all(judge: _JudgeBackend, conversations: list[list[Message]],
                   label: str) -> list[Answer]:
    s = judge.settings
    session = Session(judge.make_transport(), s["cache_dir"], label=label, section="judge",
                      total=len(conversations), breaker_window=s["breaker_window"],
                      stall_warning_s=s["stall_warning_s"])
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
        _reasoning, text = split_reply(reply, judge.think)
        return Answer(text, reply.texts[0], key, reply.model, None)

    try:
        async with session:
            return await session.gather(one(m) for m in conversations)
    finally:
        print(f"{label}: {len(conversations)} parts, {sum(session.hits.values())} cached "
              f"replies, {sum(session.sent.values())} requests sent, {errors} failed for "
              f"good, {session.wall_s:.1f}s", file=sys.stderr)
