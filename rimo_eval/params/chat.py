"""The chat backends' params sections (predict.openai, predict.anthropic, predict.gemini,
predict.local, and the judge's endpoint): what the engine's transports are configured with.
Kept apart from ``config`` (which assembles and validates the whole file) so each stays small.
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from rimo_eval.io.input_files import check_input
from rimo_eval.io.workspace import shared_path
from rimo_eval.params.effects import ByKey, Content, Cost, Operational, Removed, Result
from rimo_eval.params.section import NonNegInt, Number, PosInt, PosNumber, Section


class ThinkSplit(Section):
    enabled: Result[bool] = True
    open: Result[Annotated[str, Field(min_length=1)]] = "<think>"
    close: Result[Annotated[str, Field(min_length=1)]] = "</think>"


class PricePerMtok(Section):
    input: Cost[Annotated[Number, Field(ge=0)]]
    output: Cost[Annotated[Number, Field(ge=0)]]


DEFAULT_RESPONSE_CACHE = ".rimo_cache/responses"
MAX_REPLY_BYTES = 64 * 1024 * 1024


def _http_url(url: str | None) -> str | None:
    """An http(s) URL without credentials or a query: credentials come from the environment
    (in params they would be hashed, cached and written into the predictions)."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL")
    if parts.username or parts.password or parts.query:
        raise ValueError("must not carry credentials or a query string; put the key in the "
                         "variable named by api_key_env")
    return url


def _folder(value: str | None) -> str | None:
    """A folder the stage may create: not a file, and under no file (mkdir would fail deep in
    a run with FileExistsError). Resolved as the stage resolves it (io/workspace.py)."""
    if value is None:
        return None
    if not value:
        raise ValueError("must name a folder (null: none)")
    target = shared_path(value)
    for path in (target, *target.parents):
        if path.is_symlink() and not path.exists():
            raise ValueError(f"{path} is a broken symbolic link, not a folder")
        if path.is_dir():
            return value
        if path.exists():
            raise ValueError(f"names a file, not a folder: {target}" if path == target else
                             f"cannot be a folder: {path} is a file")
    return value


class EngineParams(Section):
    """How the chat engine calls any endpoint: operational knobs, never in the fingerprint."""

    # The deadline of one request, connecting to the last byte of the reply (each retry has its
    # own): a reasoning model may think for many minutes before a non-streamed reply.
    timeout_s: Operational[PosNumber] = 1800.0
    max_retries: Operational[NonNegInt] = 6
    backoff_initial_s: Operational[Annotated[Number, Field(ge=0)]] = 1.0
    backoff_max_s: Operational[Annotated[Number, Field(ge=0)]] = 60.0
    concurrency: Operational[PosInt] = 16
    cache_dir: Operational[str | None] = DEFAULT_RESPONSE_CACHE  # null: no response cache
    # Stop after this many transport failures in a row (0: never); warn when no request has
    # finished for this many seconds (null: never).
    breaker_window: Operational[NonNegInt] = 20
    stall_warning_s: Operational[PosNumber | None] = 120.0

    @field_validator("cache_dir")
    @classmethod
    def _cache_dir(cls, value: str | None) -> str | None:
        return _folder(value)


class ChatParams(EngineParams):
    """An OpenAI-compatible chat endpoint and how to call it (predict.openai, judge). The
    defaults are the engine's: a key left out means this value."""

    base_url: Result[str | None] = "http://127.0.0.1:8000/v1"  # null: https://api.openai.com/v1
    model: Result[str | None] = None  # required by whoever sends (predict.openai, a judge)
    # Every sampling parameter may be null: not sent (the server's default).
    temperature: Result[Number | None] = 0.0
    top_p: Result[Number | None] = None
    max_tokens: Result[PosInt | None] = None
    max_completion_tokens: Result[PosInt | None] = None  # OpenAI reasoning models
    reasoning_effort: Result[str | None] = None  # low | medium | high, where the model takes it
    seed: Result[NonNegInt | None] = None  # sample j is sent seed + j
    # A leading <think>...</think> in the reply is reasoning, never the answer (null: off).
    think_split: Result[ThinkSplit | None] = ThinkSplit()
    extra_body: Result[dict[str, Any] | None] = Field(default_factory=dict)
    system_prompt: Result[str | None] = None
    api_key_env: Operational[str | None] = "OPENAI_API_KEY"  # the variable's NAME, not the key
    # The most bytes a reply body may have once decoded (gzip included): a larger one is that
    # item's error (error_kind reply_too_large), read no further. Real replies are far smaller
    # (32 KB of reasoning is about 40 KB of JSON); the cap bounds memory against a bomb.
    max_reply_bytes: Operational[PosInt] = MAX_REPLY_BYTES

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return _http_url(value)

    @field_validator("extra_body")
    @classmethod
    def _json_body(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"is not JSON: {exc}") from None
        return value


class MessageBatchParams(Section):
    """predict.anthropic.batch: send through Anthropic's Message Batches
    (rimo_eval/chat/batch/anthropic.py). Operational: the replies, so the predictions, are those
    of the online path."""

    enabled: Cost[bool] = False  # the batch price applies
    poll_s: Operational[PosNumber] = 30.0  # between retrieves of a live batch
    max_requests: Operational[PosInt] = 100_000  # per batch (Anthropic's documented limit)
    max_bytes: Operational[PosInt] = 256_000_000  # per create request (Anthropic: 256 MB)
    max_resubmits: Operational[NonNegInt] = 2  # follow-up batches for a request not answered
    fallback_online: Operational[bool] = False  # then send it online instead of failing it
    # batch price = discount x price
    discount: Cost[Annotated[Number, Field(ge=0, le=1)]] = 0.5


class BatchParams(MessageBatchParams):
    """predict.openai.batch: send through the OpenAI Batch API (rimo_eval/chat/batch). Operational:
    the replies, so the predictions, are those of the online path."""

    completion_window: Operational[str] = "24h"
    max_requests: Operational[PosInt] = 50_000  # per batch (OpenAI's documented limit)
    max_bytes: Operational[PosInt] = 200_000_000  # per input file (OpenAI: 200 MB)


class OpenAIParams(ChatParams):
    # Removed in favour of predict.samples: kept here so the backend can say so by name.
    n: Removed[PosInt | None] = None
    price_per_mtok: Cost[PricePerMtok | None] = None  # {input, output} USD per million tokens
    batch: ByKey[BatchParams] = BatchParams()


class NativeChatParams(EngineParams):
    """A provider's own API through its official SDK (predict.anthropic, predict.gemini): the
    keys both share. Sampling keys default to null (not sent: the model's default)."""

    base_url: Result[str | None] = None  # null: the provider's public API
    model: Result[str | None] = None  # required
    temperature: Result[Number | None] = None
    top_p: Result[Number | None] = None
    system_prompt: Result[str | None] = None
    api_key_env: Operational[str | None] = None  # the variable's NAME, never the key
    price_per_mtok: Cost[PricePerMtok | None] = None  # thinking is billed as output
    # As predict.openai's: the most bytes a reply may have decoded (counted in the SDK's httpx
    # transport, capped_http.py); a batch's results file is bounded per line by it instead.
    max_reply_bytes: Operational[PosInt] = MAX_REPLY_BYTES

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return _http_url(value)


class AnthropicParams(NativeChatParams):
    """predict.anthropic: the Messages API (rimo_eval/chat/anthropic/translate.py says how each
    key is sent)."""

    max_tokens: Result[PosInt] = 16000  # required by the API; thinking counts against it
    # {type: enabled, budget_tokens: N}, {type: adaptive} or {type: disabled}, as the API
    # documents it; null: not sent.
    thinking: Result[dict[str, Any] | None] = None
    effort: Result[str | None] = None  # output_config.effort, for models that take it
    api_version: Result[str | None] = None  # the anthropic-version header; null: the SDK's
    api_key_env: Operational[str | None] = "ANTHROPIC_API_KEY"
    batch: ByKey[MessageBatchParams] = MessageBatchParams()


class GeminiParams(NativeChatParams):
    """predict.gemini: the Gemini API through google-genai (rimo_eval/chat/gemini/translate.py)."""

    max_output_tokens: Result[PosInt | None] = None  # thinking included; null: the model's
    # {thinking_budget: N} or {thinking_level: low|high}, plus include_thoughts: true.
    thinking_config: Result[dict[str, Any] | None] = None
    seed: Result[NonNegInt | None] = None  # sample j is sent seed + j
    api_key_env: Operational[str | None] = "GEMINI_API_KEY"


class LocalParams(Section):
    model_path: Content[str | None] = None  # null: the packaged Gemma 3 270M
    model_cache_dir: Operational[Annotated[str, Field(min_length=1)]] = ".rimo_cache/models"
    n_ctx: Result[PosInt] = 8192
    n_threads: Operational[PosInt | None] = None  # null: half the cores
    max_tokens: Result[PosInt] = 256  # the value params.yaml has always set
    temperature: Result[Annotated[Number, Field(ge=0)]] = 0.0
    seed: Result[NonNegInt] = 0
    system_prompt: Result[str | None] = None
    cache_dir: Operational[str | None] = DEFAULT_RESPONSE_CACHE

    @field_validator("cache_dir", "model_cache_dir")
    @classmethod
    def _cache_dir(cls, value: str | None) -> str | None:
        return _folder(value)

    @field_validator("model_path")
    @classmethod
    def _model_path(cls, value: str | None) -> str | None:
        check_input(value)
        return value
