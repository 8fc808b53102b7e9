"""``predict.backend: gemini``: the Gemini API through ``google-genai`` (async client).

Requests are ``translate.generate_kwargs`` (the cache key hashes them; sample j is sent
``seed + j`` when a seed is set), replies ``translate.parse_response``, failures
``translate.classify_error``; retries, the breaker and the probe are the engine's (``native``,
``retrying``). Two SDK defaults are overridden (see translate's note): ``api_version`` is pinned
to ``v1beta`` and the client's own retries are off (``HttpRetryOptions(attempts=1)``);
``generate_kwargs`` turns automatic continuation off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google import genai
from google.genai import types

from rimo_eval.chat import capped_http
from rimo_eval.chat.api_key import resolve_api_key
from rimo_eval.chat.errors import ErrorDecision
from rimo_eval.chat.gemini import translate
from rimo_eval.chat.native import NativeTransport
from rimo_eval.params.chat import GeminiParams

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"  # where base_url: null points
API_VERSION = "v1beta"


class GeminiTransport(NativeTransport):
    def __init__(self, params: GeminiParams, section: str = translate.PARAMS_SECTION) -> None:
        base_url = (params.base_url or GEMINI_BASE_URL).rstrip("/")
        key = resolve_api_key(params.api_key_env, base_url, section)
        super().__init__(params, section, base_url, key)
        self._params = params
        self._model = params.model
        self._client = genai.Client(api_key=key, http_options=types.HttpOptions(
            base_url=base_url, api_version=API_VERSION, timeout=int(self._timeout_s * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
            # A transport of our own also keeps the SDK on httpx (not aiohttp): the decoded
            # body is counted there against max_reply_bytes (capped_http).
            async_client_args=capped_http.client_args(self.cap)))

    def endpoint(self) -> dict[str, Any]:
        return {"transport": "gemini", "base_url": self.base_url, "api_version": API_VERSION}

    def request(self, messages: list[dict[str, str]], sample: int = 0) -> dict[str, Any]:
        return translate.generate_kwargs(self._params, messages, sample)

    async def _call(self, request: dict[str, Any]) -> Any:
        return await self._client.aio.models.generate_content(**request)

    def _parse(self, response: Any) -> dict[str, Any]:
        return translate.parse_response(response)

    def _classify(self, exc: BaseException, request: Mapping[str, Any]) -> ErrorDecision:
        return translate.classify_error(exc, request)

    async def probe(self) -> None:
        await self._probe_with(lambda: self._client.aio.models.get(model=str(self._model)))

    async def aclose(self) -> None:
        await self._client.aio.aclose()
