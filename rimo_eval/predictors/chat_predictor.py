"""The RIMO protocol over the chat engine: items in, chat calls out, replies back into
predictions.

A backend is a ``ChatPredictor`` subclass (its typed section, ``params_model``, and its
transport from ``rimo_eval.chat``). Every backend (``openai`` in ``openai_chat``, ``local`` in
``local_model``) shares the prompt templates, the ``\\boxed{}`` extraction and the RIMO-P
chaining here, and the engine's ``Session`` (response cache, concurrency, probe, breaker,
progress bar):

* ``predict.samples: k``: every item gets k independent samples, each its own request(s) with
  the sample index in the cache key (sample 0's key is the key of a k = 1 run, so a k = 1 cache
  stays warm). One ``Prediction`` per (item, sample), ``sample`` 0-based.
* RIMO-N: one call; the answer text is the reply after any leading ``<think>…</think>`` block
  (``think_split``); the prediction is the content of its last balanced ``\\boxed{}``. A reply
  with no box is status ``ok`` with prediction ``""`` and ``details.extraction`` ``"none"``, or
  ``"truncated"`` when the server cut it off (``finish_reason: length``).
* RIMO-P (the paper's protocol): one call per sub-problem, in order; call k shows the problem,
  parts 1..k-1 with the model's own proofs (sample j's own, never reasoning text) as already
  proved facts, then part k. If a part fails for good the sample is status ``error``, with
  ``details.error_kind`` (``"context_length"`` for a prompt over the context window).
* A request that still fails after its retries (``TransportError``) marks only its sample
  ``error``; a transport raises ``StageError`` for configuration failures that would fail every
  item, and that stops the stage. Failing fast is the session's (``rimo_eval.chat.session``).

The reading of a reply (reasoning apart, extraction status, usage) is ``reply_reading``. Details
are a pure function of the (cached) replies, so re-running over a warm cache writes
byte-identical predictions; run facts (requests sent, cache hits) go to ``run_stats``.
"""

from __future__ import annotations

import sys
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

from rimo_eval import __version__
from rimo_eval.artifacts.items import Item
from rimo_eval.artifacts.predictions import STATUS_ERROR, Prediction
from rimo_eval.chat.session import Session, run_sync
from rimo_eval.chat.transport import ChatTransport, TransportError
from rimo_eval.errors import StageError
from rimo_eval.params.chat import (
    AnthropicParams,
    ChatParams,
    EngineParams,
    GeminiParams,
    LocalParams,
    NativeChatParams,
    OpenAIParams,
    ThinkSplit,
)
from rimo_eval.params.effects import Effect, fields_marked, identity
from rimo_eval.params.section import Section
from rimo_eval.predictors import extract
from rimo_eval.predictors.base import Predictor, own_section
from rimo_eval.predictors.prompting import rimo_n_messages, rimo_p_messages, template_hashes
from rimo_eval.predictors.reply_reading import USAGE_KEYS, Answer, read_reply, sum_parts
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

PROTOCOL = "rimo-chat-v1"  # bump when the way items become calls changes


# A chat backend's section: an endpoint's (openai, anthropic, gemini) or the local model's.
P = TypeVar("P", bound=ChatParams | NativeChatParams | LocalParams)
# The keys of those sections kept out of the fingerprint (not marked ``Result``: operational
# knobs, prices, model files fingerprinted by content, removed keys), derived from the marks.
OPERATIONAL_KEYS = frozenset().union(*(
    frozenset(m.model_fields) - fields_marked(m, Effect.RESULT)
    for m in (OpenAIParams, AnthropicParams, GeminiParams, LocalParams)))


# --------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------
class ChatPredictor(Predictor, Generic[P]):
    """Shared engine. Subclasses name their typed section (``params_model``) and build their
    transport from it."""

    params_model: type[P]

    def __init__(self, config: Section | None = None) -> None:
        super().__init__(config)
        self.section = f"predict.{self.name}"
        self.params: P = own_section(self.params_model, config, self.section)
        self.run_stats: dict[str, Any] = {}

    @abstractmethod
    def make_transport(self) -> ChatTransport: ...

    def engine(self) -> EngineParams:
        """How the engine runs the calls (the ``Session``'s settings): the section itself,
        where it is an endpoint's (``EngineParams``)."""
        if not isinstance(self.params, EngineParams):
            raise TypeError(f"{type(self).__name__} must say its engine settings (engine())")
        return self.params

    def think_split(self) -> ThinkSplit | None:
        """The leading think block taken off each reply (None: the reply as it came)."""
        return None

    def batched(self) -> bool:
        """A batch API run: replies come a completion window later, so no stall warning."""
        return False

    def reply_budget(self) -> int | None:
        """The most tokens a reply may have, for ``--estimate`` (None: the server's default)."""
        return None

    def offline_transport(self) -> ChatTransport:
        """A transport for ``--estimate``: builds requests and keys, writes nothing."""
        return self.make_transport()

    def endpoint_identity(self) -> dict[str, Any]:
        """The part of the transport's endpoint that belongs in the fingerprint."""
        return {}

    def identity(self) -> dict[str, Any]:
        # The fields marked Result (params/effects.py): each as the file set it, else its default.
        ident = {"backend": self.name, "params": identity(self.params),
                 "templates": template_hashes(), "protocol": PROTOCOL,
                 "extractor": extract.VERSION, "version": __version__, **self.endpoint_identity()}
        return {**ident, "samples": self.samples} if self.samples != 1 else ident

    def predict(self, items: Sequence[Item]) -> list[Prediction]:
        return run_sync(self._predict_all(list(items)))

    # -- the async core ----------------------------------------------------------------------
    async def _predict_all(self, items: list[Item]) -> list[Prediction]:
        for item in items:
            if item.track not in (TRACK_N, TRACK_P):
                raise StageError(f"{item.problem_id}: unknown track {item.track!r}")
        label = f"predict[{self.name}]"
        engine = self.engine()
        if self.batched():
            engine = engine.model_copy(update={"stall_warning_s": None})
        session = Session(self.make_transport(), engine, label=label, section=self.section,
                          total=calls_needed(items, self.samples))
        protocol = _Protocol(self, session)
        try:
            async with session:
                return await protocol.all(items)
        finally:
            self.run_stats = _run_stats(session, protocol, len(items), self.samples)


def _run_stats(session: Session, protocol: _Protocol, items: int, samples: int
               ) -> dict[str, Any]:
    wall = session.wall_s
    print(f"{session.label}: {items} items x {samples} samples, "
          f"{sum(session.hits.values())} cached replies, {sum(session.sent.values())} requests "
          f"sent, {protocol.errors} samples failed, {wall:.1f}s", file=sys.stderr)
    return {"samples": samples, "wall_s": round(wall, 3), "failed": protocol.errors,
            "tracks": {t: {"requests_sent": session.sent[t], "cached_replies": session.hits[t]}
                       for t in (TRACK_N, TRACK_P)}}


def calls_needed(items: Iterable[Item], samples: int = 1) -> int:
    """Requests a run asks for: one per RIMO-N item, one per sub-problem of a RIMO-P item,
    for each of the k samples."""
    return samples * sum(1 if it.track == TRACK_N else len(it.sub_problems) for it in items)


class _Protocol:
    """One ``predict`` call: the RIMO-N and RIMO-P protocol over one engine session."""

    def __init__(self, predictor: ChatPredictor[Any], session: Session) -> None:
        self.session = session
        self.samples = predictor.samples
        self.think = predictor.think_split()
        self.system_prompt: str | None = predictor.params.system_prompt
        self.spool = predictor.spool
        self.errors = 0

    async def all(self, items: list[Item]) -> list[Prediction]:
        # Longest chains first (the semaphore is FIFO): a 4-part RIMO-P item started last
        # would leave the run waiting 4 round trips on one connection at the end.
        wanted = [(it, j) for it in items for j in range(self.samples)]
        order = sorted(range(len(wanted)), key=lambda i: -calls_needed([wanted[i][0]]))
        done = await self.session.gather(self.one(*wanted[i]) for i in order)
        by_index = dict(zip(order, done, strict=True))
        return [by_index[i] for i in range(len(wanted))]

    async def one(self, item: Item, sample: int) -> Prediction:
        # One slot per sample: RIMO-P parts run in order inside it, samples run in parallel.
        async with self.session.slot():
            pred = await (self.rimo_n(item, sample) if item.track == TRACK_N
                          else self.rimo_p(item, sample))
        pred.sample = sample
        if pred.status == STATUS_ERROR:
            self.errors += 1
        if self.spool is not None:
            self.spool.park(pred)  # its texts to disk until the table is written
        return pred

    async def rimo_n(self, item: Item, sample: int) -> Prediction:
        try:
            reply, key = await self.session.call(
                item.track, rimo_n_messages(item, self.system_prompt), sample)
        except TransportError as exc:
            self.session.skip(1)
            return Prediction(item.track, item.problem_id, None, STATUS_ERROR, str(exc),
                              {"request_sha256": exc.request_sha256, "error_kind": exc.kind,
                               "requests": 1, "usage": dict.fromkeys(USAGE_KEYS, 0),
                               **dict.fromkeys(exc.flags, True)})
        return n_prediction(item, read_reply(reply, key, self.think))

    async def rimo_p(self, item: Item, sample: int) -> Prediction:
        proved: list[str] = []
        parts: list[dict[str, Any]] = []
        total = len(item.sub_problems)
        for index in range(total):
            messages = rimo_p_messages(item, index, proved, self.system_prompt)
            try:
                reply, key = await self.session.call(item.track, messages, sample)
            except TransportError as exc:
                self.session.skip(total - index)  # the remaining parts will not be asked
                details = sum_parts(parts, index + 1)
                details.update(failed_request_sha256=exc.request_sha256, error_kind=exc.kind,
                               failed_part=index + 1, **dict.fromkeys(exc.flags, True))
                return Prediction(item.track, item.problem_id, None, STATUS_ERROR,
                                  f"part {index + 1} of {total}: {exc}", details)
            add_part(read_reply(reply, key, self.think), proved, parts)
        return Prediction(item.track, item.problem_id, proved, details=sum_parts(parts, total))


# How a reply becomes a prediction, in one place: a run (above) and what a run has in the
# response cache so far (rimo_eval.predictors.cached, ``rimo-eval view --partial``).
def n_prediction(item: Item, answer: Answer) -> Prediction:
    """RIMO-N: the content of the answer text's last balanced box (``""``: none)."""
    return Prediction(item.track, item.problem_id, extract.extract_boxed(answer.text) or "",
                      details=answer.details)


def add_part(answer: Answer, proved: list[str], parts: list[dict[str, Any]]) -> None:
    """RIMO-P: one part's reply read; its text is what the next part's prompt shows proved."""
    parts.append(answer.details)
    proved.append(answer.text.strip())
