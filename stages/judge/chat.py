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

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from stages.core.config import ChatParams, JudgeParams, coerce
from stages.core.errors import ConfigError, StageError
from stages.predictors.cache import ResponseCache
from stages.predictors.chat_engine import _Run
from stages.predictors.openai_chat import OpenAIPredictor, OpenAITransport
from stages.predictors.progress import DEFAULT_STALL_WARNING_S, Progress
from stages.predictors.prompting import Message
from stages.predictors.replies import split_reply
from stages.predictors.transport import ChatTransport, TransportError

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
    return asyncio.run(_ask_all(backend(cfg), list(conversations), label))


class _JudgeRun(_Run):
    """The engine's run (cache, single flight, progress bar) counting judge calls."""

    def close(self) -> dict[str, Any]:
        self.bar.close()
        print(f"{self.label}: {self.bar.bar.total} parts, {sum(self.hits.values())} cached "
              f"replies, {sum(self.sent.values())} requests sent, {self.errors} failed for "
              f"good, {time.monotonic() - self.started:.1f}s", file=sys.stderr)
        return {}


async def _ask_all(judge: _JudgeBackend, conversations: list[list[Message]],
                   label: str) -> list[Answer]:
    transport = judge.make_transport()
    run = _JudgeRun(judge, transport, ResponseCache(judge.settings["cache_dir"]), [])
    run.label = label
    run.bar = Progress(len(conversations), label,
                       judge.settings.get("stall_warning_s", DEFAULT_STALL_WARNING_S))
    run.bar.start()

    async def one(messages: list[Message]) -> Answer:
        async with run.semaphore:
            try:
                reply, key = await run.call("judge", messages, 0)
            except TransportError as exc:
                run.bar.update(1)
                run.errors += 1
                return Answer(None, None, exc.request_sha256, None, str(exc))
        _reasoning, text = split_reply(reply, judge.think)
        return Answer(text, reply.texts[0], key, reply.model, None)

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(m)) for m in conversations]
    except ExceptionGroup as failed:  # a StageError (401, 404...) stops the whole stage
        raise failed.exceptions[0] from None
    finally:
        run.close()
        await transport.aclose()
    return [t.result() for t in tasks]
