"""``rimo-eval predict --estimate``: what a chat run would ask, before anything is sent.

It builds every request the engine would build and looks each one up in the response cache
(read only), so it sends nothing and writes nothing. RIMO-P part k's prompt holds the model's
replies to parts 1..k-1: while those are cached the prompt is exact; after the first uncached
part each unknown earlier reply is counted as a full token budget (``max_tokens`` or
``max_completion_tokens``), or as empty when there is no budget (then the count is a lower
bound, and the output says so).

Prompt tokens are characters / 4 of the message contents: no tokenizer is loaded (one would
need the model's own, which an OpenAI-compatible server does not hand out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rimo_eval.artifacts.items import Item
from rimo_eval.chat import served
from rimo_eval.chat.cache import ResponseCache
from rimo_eval.chat.reasoning import split_reply
from rimo_eval.chat.session import lookup
from rimo_eval.chat.transport import ChatReply, ChatTransport
from rimo_eval.predictors.chat_predictor import ChatPredictor
from rimo_eval.predictors.prompting import rimo_n_messages, rimo_p_messages
from rimo_eval.rimo.tracks import TRACK_N, TRACKS

CHARS_PER_TOKEN = 4
TOKENIZER = "characters / 4 (no tokenizer loaded)"


@dataclass
class TrackEstimate:
    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0  # of every request
    prompt_tokens_to_send: int = 0  # of the requests not in the cache

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "cached": self.cached,
                "to_send": self.requests - self.cached, "prompt_tokens": self.prompt_tokens,
                "prompt_tokens_to_send": self.prompt_tokens_to_send}


@dataclass
class Estimate:
    samples: int
    budget_tokens: int | None
    tracks: dict[str, TrackEstimate] = field(
        default_factory=lambda: {t: TrackEstimate() for t in TRACKS})

    def as_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "tokenizer": TOKENIZER,
                "tracks": {t: e.as_dict() for t, e in self.tracks.items()}}


def prompt_tokens(messages: list[dict[str, str]]) -> int:
    chars = sum(len(m["content"]) for m in messages)
    return -(-chars // CHARS_PER_TOKEN)


def estimate(predictor: ChatPredictor[Any], items: Sequence[Item]) -> Estimate:
    params = predictor.params
    budget = predictor.reply_budget()
    est = Estimate(predictor.samples, budget)
    transport = predictor.offline_transport()
    cache = ResponseCache(params.cache_dir, readonly=True)
    # The weights the server reported last: the estimate asks no server.
    identity = served.recorded(cache, transport)
    system = params.system_prompt
    filler = "x" * (CHARS_PER_TOKEN * (budget or 0))  # an unknown earlier reply, at full budget
    for item in items:
        track = est.tracks[item.track]
        for sample in range(predictor.samples):
            if item.track == TRACK_N:
                _count(track, transport, cache, identity, rimo_n_messages(item, system), sample)
                continue
            proved: list[str] = []
            known = True
            for index in range(len(item.sub_problems)):
                messages = rimo_p_messages(item, index, proved, system)
                reply = (_count(track, transport, cache, identity, messages, sample) if known
                         else None)
                if reply is None:
                    if known:  # this part is counted above; later parts are not yet
                        known = False
                    else:
                        _add(track, messages, cached=False)
                    proved.append(filler)
                else:
                    proved.append(split_reply(reply, predictor.think_split())[1].strip())
    cache.close()
    return est


def _count(track: TrackEstimate, transport: ChatTransport, cache: ResponseCache,
           identity: served.Identity, messages: list[dict[str, str]], sample: int
           ) -> ChatReply | None:
    reply = lookup(cache, transport, messages, sample, identity)[3]
    _add(track, messages, cached=reply is not None)
    return reply


def _add(track: TrackEstimate, messages: list[dict[str, str]], cached: bool) -> None:
    tokens = prompt_tokens(messages)
    track.requests += 1
    track.prompt_tokens += tokens
    if cached:
        track.cached += 1
    else:
        track.prompt_tokens_to_send += tokens


def render(est: Estimate, price: dict[str, float] | None = None) -> str:
    lines = []
    total = TrackEstimate()
    for name, t in est.tracks.items():
        lines.append(f"  {name}: {t.requests} requests, {t.cached} already cached, "
                     f"{t.requests - t.cached} to send; prompt tokens {t.prompt_tokens} "
                     f"({t.prompt_tokens_to_send} to send)")
        total.requests += t.requests
        total.cached += t.cached
        total.prompt_tokens += t.prompt_tokens
        total.prompt_tokens_to_send += t.prompt_tokens_to_send
    lines.append(f"  total: {total.requests} requests, {total.cached} already cached, "
                 f"{total.requests - total.cached} to send; prompt tokens "
                 f"{total.prompt_tokens} ({total.prompt_tokens_to_send} to send)")
    lines.append(f"  prompt tokens: {TOKENIZER}; "
                 + (f"RIMO-P replies not yet cached counted as {est.budget_tokens} tokens each"
                    if est.budget_tokens else
                    "RIMO-P replies not yet cached counted as empty: a lower bound"))
    to_send = total.requests - total.cached
    if price is not None:
        factor = price.get("batch_discount", 1.0)
        cost_in = factor * total.prompt_tokens_to_send * price["input"] / 1e6
        line = ("  estimated input cost of what is to send"
                + (f" at the batch price (x{factor:g})" if "batch_discount" in price else "")
                + f": ${cost_in:.4f}")
        if est.budget_tokens:
            cost_out = factor * to_send * est.budget_tokens * price["output"] / 1e6
            line += f"; output at most ${cost_out:.4f} ({est.budget_tokens} tokens a request)"
        lines.append(line)
    return "\n".join(lines)
