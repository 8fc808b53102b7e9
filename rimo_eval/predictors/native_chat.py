"""``predict.backend: anthropic`` and ``predict.backend: gemini``: the providers' own APIs
through their official SDKs, on the shared engine (``chat_predictor.ChatPredictor``): the
prompts, extraction, RIMO-P chaining, k samples, cache and retries are the same as for
``openai``; the transports are ``rimo_eval.chat.anthropic`` and ``rimo_eval.chat.gemini``. Thinking
arrives in its own blocks or parts (``details.reasoning``), so no ``<think>`` split is applied:
a ``<think>`` written into the answer text stays answer text.
"""

from __future__ import annotations

from typing import TypeVar

from rimo_eval.chat.transport import ChatTransport
from rimo_eval.errors import ConfigError
from rimo_eval.params.chat import AnthropicParams, GeminiParams, NativeChatParams
from rimo_eval.params.section import Section
from rimo_eval.predictors.chat_predictor import ChatPredictor

N = TypeVar("N", bound=NativeChatParams)


class _NativePredictor(ChatPredictor[N]):
    def __init__(self, config: Section | None = None) -> None:
        super().__init__(config)
        if not self.params.model:
            raise ConfigError(f"params.yaml: {self.section}.model must name the model")

    def offline_transport(self) -> ChatTransport:
        # --estimate sends nothing, so it needs no key: the endpoint (the cache key) is the same.
        return self._transport(self.params.model_copy(update={"api_key_env": None}))

    def make_transport(self) -> ChatTransport:
        return self._transport(self.params)

    def _transport(self, params: N) -> ChatTransport:
        raise NotImplementedError


class AnthropicPredictor(_NativePredictor[AnthropicParams]):
    """``predict.backend: anthropic`` - Claude through the Messages API."""

    name = "anthropic"
    params_model = AnthropicParams

    def batched(self) -> bool:
        return self.params.batch.enabled

    def reply_budget(self) -> int | None:
        return self.params.max_tokens

    def make_transport(self) -> ChatTransport:
        if self.batched():  # Message Batches: same requests, keys and cache
            from rimo_eval.chat.batch.anthropic import AnthropicBatchTransport

            return AnthropicBatchTransport(self.params, self.section)
        return self._transport(self.params)

    def _transport(self, params: AnthropicParams) -> ChatTransport:
        from rimo_eval.chat.anthropic.transport import AnthropicTransport  # the SDK loads late
        return AnthropicTransport(params, self.section)


class GeminiPredictor(_NativePredictor[GeminiParams]):
    """``predict.backend: gemini`` - Gemini through the Gemini API (google-genai)."""

    name = "gemini"
    params_model = GeminiParams

    def reply_budget(self) -> int | None:
        return self.params.max_output_tokens

    def _transport(self, params: GeminiParams) -> ChatTransport:
        from rimo_eval.chat.gemini.transport import GeminiTransport  # the SDK loads late
        return GeminiTransport(params, self.section)
