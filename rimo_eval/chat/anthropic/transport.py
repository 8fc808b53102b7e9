"""``predict.backend: anthropic``: the Messages API through the official async SDK.

Requests are ``translate.create_kwargs`` (the cache key hashes them; the API takes no seed, so
sample j differs from sample 0 only by the index in the cache key), replies
``translate.parse_message``, failures ``translate.classify_error``; retries, the breaker and
the probe are the engine's (``native``, ``retrying``). The SDK retries nothing
(``max_retries=0``) and has an explicit timeout: with its default one, a non-streamed
``max_tokens`` above 21,333 is refused client-side. Its httpx client counts the decoded body
against ``max_reply_bytes`` (``capped_http``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anthropic
import httpx2

from rimo_eval.chat import capped_http
from rimo_eval.chat.anthropic import translate
from rimo_eval.chat.api_key import resolve_api_key
from rimo_eval.chat.errors import ErrorDecision
from rimo_eval.chat.native import NativeTransport
from rimo_eval.params.chat import AnthropicParams

ANTHROPIC_BASE_URL = "https://api.anthropic.com"  # where base_url: null points


class AnthropicTransport(NativeTransport):
    def __init__(self, params: AnthropicParams, section: str = translate.PARAMS_SECTION
                 ) -> None:
        base_url = (params.base_url or ANTHROPIC_BASE_URL).rstrip("/")
        key = resolve_api_key(params.api_key_env, base_url, section)
        super().__init__(params, section, base_url, key)
        self._params = params
        self._client = anthropic.AsyncAnthropic(
            api_key=key, base_url=base_url, max_retries=0,
            timeout=httpx2.Timeout(self._timeout_s, connect=self._connect_s),
            http_client=anthropic.DefaultAsyncHttpxClient(**capped_http.client_args(self.cap)))

    def endpoint(self) -> dict[str, Any]:
        return {"transport": "anthropic-messages", "base_url": self.base_url}

    def request(self, messages: list[dict[str, str]], sample: int = 0) -> dict[str, Any]:
        return translate.create_kwargs(self._params, messages)

    async def _call(self, request: dict[str, Any]) -> Any:
        return await self._client.messages.create(**request)

    def _parse(self, response: Any) -> dict[str, Any]:
        return translate.parse_message(response)

    def _classify(self, exc: BaseException, request: Mapping[str, Any]) -> ErrorDecision:
        return translate.classify_error(exc, request)

    async def probe(self) -> None:
        await self._probe_with(lambda: self._client.models.list(limit=1))

    async def aclose(self) -> None:
        await self._client.close()
