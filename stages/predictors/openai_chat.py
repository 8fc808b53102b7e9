"""``predict.backend: openai`` - any OpenAI-compatible chat-completions server.

The RIMO protocol, prompts, cache and retries are the shared engine's
(``chat_predictor.ChatPredictor`` over ``stages.chat``); the transport is
``stages.chat.openai``. Here: the backend's settings, checked once.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from stages.chat.breaker import DEFAULT_WINDOW
from stages.chat.cache import DEFAULT_CACHE_DIR
from stages.chat.openai.transport import OPENAI_BASE_URL, OpenAITransport, normalise_base_url
from stages.chat.progress import DEFAULT_STALL_WARNING_S
from stages.chat.transport import ChatTransport
from stages.core.errors import StageError
from stages.predictors.chat_predictor import ChatPredictor, require


class OpenAIPredictor(ChatPredictor):
    """``predict.backend: openai`` - any OpenAI-compatible chat-completions server."""

    name = "openai"
    defaults: ClassVar[dict[str, Any]] = {
        "base_url": "http://127.0.0.1:8000/v1",  # null: https://api.openai.com/v1
        "model": None,
        "temperature": 0.0,  # null: not sent (OpenAI reasoning models accept only their default)
        "top_p": None,  # null: not sent (the server's default)
        "max_tokens": None,
        "max_completion_tokens": None,  # OpenAI reasoning models: instead of max_tokens
        "reasoning_effort": None,  # "low" | "medium" | "high" on models that take it
        "seed": None,  # sample j is sent seed + j
        "think_split": {"enabled": True, "open": "<think>", "close": "</think>"},
        "price_per_mtok": None,  # {input: USD, output: USD} per million tokens: a cost estimate
        "extra_body": {},
        "system_prompt": None,
        "timeout_s": 1800.0,  # a reasoning model may think for many minutes before replying
        "max_retries": 6,
        "backoff_initial_s": 1.0,
        "backoff_max_s": 60.0,
        "concurrency": 16,
        "api_key_env": "OPENAI_API_KEY",
        "cache_dir": str(DEFAULT_CACHE_DIR),
        "breaker_window": DEFAULT_WINDOW,  # stop when this many requests in a row failed
        "stall_warning_s": DEFAULT_STALL_WARNING_S,  # warn when nothing finished for this long
    }

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        if config and "n" in config:  # k separate requests replaced n (see README, samples)
            raise StageError("params.yaml: predict.openai.n is gone; set predict.samples: k "
                             "for k samples per item")
        super().__init__(config)
        s = self.settings
        require(isinstance(s["model"], str) and bool(s["model"]),
                "predict.openai.model must name the served model")
        require(s["reasoning_effort"] is None or isinstance(s["reasoning_effort"], str),
                "predict.openai.reasoning_effort must be a string (low, medium, high) or null")
        for key in ("max_tokens", "max_completion_tokens", "seed"):
            require(s[key] is None or (isinstance(s[key], int) and not isinstance(s[key], bool)
                                       and s[key] >= 0),
                    f"predict.openai.{key} must be null or an integer >= 0")
        price = s["price_per_mtok"]
        require(price is None or (
            isinstance(price, dict) and set(price) == {"input", "output"}
            and all(isinstance(v, int | float) and v >= 0 for v in price.values())),
            "predict.openai.price_per_mtok must be null or {input: USD, output: USD} "
            "per million tokens")
        require(isinstance(s["concurrency"], int) and s["concurrency"] >= 1,
                "predict.openai.concurrency must be an integer >= 1")
        require(isinstance(s["max_retries"], int) and s["max_retries"] >= 0,
                "predict.openai.max_retries must be an integer >= 0")
        require(isinstance(s["breaker_window"], int) and s["breaker_window"] >= 0,
                "predict.openai.breaker_window must be an integer >= 0 (0: never stop)")
        require(s["stall_warning_s"] is None or (
            isinstance(s["stall_warning_s"], int | float) and s["stall_warning_s"] > 0),
            "predict.openai.stall_warning_s must be a number of seconds > 0 or null")
        require(isinstance(s["extra_body"], dict | None),
                "predict.openai.extra_body must be a mapping")
        require(s["api_key_env"] is None or isinstance(s["api_key_env"], str),
                "predict.openai.api_key_env must be the NAME of an environment variable")
        try:
            json.dumps(s["extra_body"], allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise StageError(f"params.yaml: predict.openai.extra_body is not JSON: {exc}") from exc
        normalise_base_url(s["base_url"] or OPENAI_BASE_URL)

    def make_transport(self) -> ChatTransport:
        return OpenAITransport(self.settings)

    def offline_transport(self) -> ChatTransport:
        # --estimate sends nothing, so it needs no key: the endpoint (the cache key) is the same.
        return OpenAITransport({**self.settings, "api_key_env": None})
