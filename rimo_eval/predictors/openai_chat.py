"""``predict.backend: openai`` - any OpenAI-compatible chat-completions server.

The RIMO protocol, prompts, cache and retries are the shared engine's
(``chat_predictor.ChatPredictor`` over ``rimo_eval.chat``); the transport is
``rimo_eval.chat.openai``. The settings are ``params.config.OpenAIParams``, checked there once.
"""

from __future__ import annotations

from rimo_eval.chat.openai.transport import OpenAITransport
from rimo_eval.chat.transport import ChatTransport
from rimo_eval.errors import ConfigError
from rimo_eval.params.chat import OpenAIParams, ThinkSplit
from rimo_eval.params.section import Section
from rimo_eval.predictors.chat_predictor import ChatPredictor


class OpenAIPredictor(ChatPredictor[OpenAIParams]):
    """``predict.backend: openai`` - any OpenAI-compatible chat-completions server."""

    name = "openai"
    params_model = OpenAIParams

    def __init__(self, config: Section | None = None) -> None:
        super().__init__(config)
        if self.params.n is not None:  # k separate requests replaced n (docs/concepts.md, samples)
            raise ConfigError(f"params.yaml: {self.section}.n is gone; set predict.samples: k "
                              "for k samples per item")
        if not self.params.model:
            raise ConfigError(f"params.yaml: {self.section}.model must name the served model")

    def think_split(self) -> ThinkSplit | None:
        return self.params.think_split

    def batched(self) -> bool:
        return self.params.batch.enabled

    def reply_budget(self) -> int | None:
        return self.params.max_completion_tokens or self.params.max_tokens

    def make_transport(self) -> ChatTransport:
        if self.batched():  # the Batch API: same requests, keys and cache
            # Imported here: it loads the official openai client, which an online run of
            # this backend never needs (tests/engine/test_openai_http.py).
            from rimo_eval.chat.batch.openai import OpenAIBatchTransport

            return OpenAIBatchTransport(self.params, self.section)
        return OpenAITransport(self.params, self.section)

    def offline_transport(self) -> ChatTransport:
        # --estimate sends nothing, so it needs no key: the endpoint (the cache key) is the same.
        return OpenAITransport(self.params.model_copy(update={"api_key_env": None}),
                               self.section)
