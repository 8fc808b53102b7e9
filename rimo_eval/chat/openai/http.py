"""The HTTP calls of the openai transport: aiohttp directly, raising the engine's own errors.

At 64 connections the official ``AsyncOpenAI`` stack cost about five times the CPU of aiohttp
itself per request (``benchmarks/README.md``), on a machine where that CPU is the ceiling. So
the requests go straight through one ``aiohttp.ClientSession``, set up the way the official
client sets it up (the proxy the environment names, the TLS context of its CA bundle), and
every failure becomes one of ``rimo_eval.chat.errors``: ``HTTPStatusError`` for a status >= 400
(the server's message, code, param and ``Retry-After``), ``RequestTimeout``, and
``ConnectionFailed`` raised from the aiohttp error so that the cause (``ConnectionRefusedError``,
a DNS or TLS failure) stays in the chain for ``probe``. Nothing is imported on a failure: a
failed request costs no more than a good one.

Every reply is bounded. In time: ``timeout_s`` is the deadline of the whole request, from
connecting to the last byte of the body (aiohttp's ``total``), so a server that trickles a
byte every few seconds cannot hold a request past it; there is no separate between-reads
timeout, since a non-streamed reply sends nothing at all while the model thinks. In memory:
the body is read chunk by chunk as aiohttp inflates it (a bounded amount per step) and the read
stops at ``max_reply_bytes`` decoded (``BadReply``, ``reply_too_large``), so a gzip bomb costs
at most the cap. And in depth: JSON nested past the parser's recursion limit is ``BadReply``
(``json_too_deep``), that item's error, never a ``RecursionError`` out of the stage.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import aiohttp

from rimo_eval import __version__
from rimo_eval.chat.errors import (
    BadReply,
    ConnectionFailed,
    HTTPStatusError,
    MalformedResponse,
    RequestTimeout,
    reply_too_large,
)
from rimo_eval.params.chat import MAX_REPLY_BYTES

# The official client sends these from the environment to whatever base_url it is given.
_ENV_HEADERS = {"OPENAI_ORG_ID": "OpenAI-Organization", "OPENAI_PROJECT_ID": "OpenAI-Project"}


class OpenAIHTTP:
    """POST and GET under ``base_url`` with a bearer key, at most ``connections`` at a time;
    each request done within ``timeout_s`` and its body at most ``max_bytes`` decoded
    (``cap_key``: the params key that sets it, for the error)."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float, connect_s: float,
                 connections: int, max_bytes: int = MAX_REPLY_BYTES,
                 cap_key: str = "max_reply_bytes") -> None:
        self.base_url = base_url
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_s)
        self._max_bytes, self._cap_key = max_bytes, cap_key
        self._connections = connections
        self._headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json",
                         "Content-Type": "application/json",
                         "User-Agent": f"rimo-eval/{__version__} aiohttp/{aiohttp.__version__}",
                         **{h: os.environ[v] for v, h in _ENV_HEADERS.items()
                            if os.environ.get(v)}}
        self._session: aiohttp.ClientSession | None = None
        self._proxy: tuple[Any, Any] = (None, None)

    def _open(self) -> aiohttp.ClientSession:
        """The session, made on first use (inside the running loop)."""
        if self._session is None:
            ssl_context: Any = None  # plain http: no TLS context to load
            if self.base_url.startswith("https:"):
                import httpx2  # the official client's TLS setup (CA bundle, SSL_CERT_FILE)

                ssl_context = httpx2.create_ssl_context()
            connector = aiohttp.TCPConnector(limit=self._connections, ssl=ssl_context)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
            self._proxy = _env_proxy(self.base_url)
        return self._session

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[Any, float]:
        """The decoded JSON reply to ``POST base_url+path`` and its latency in seconds.

        Raises the engine's errors (see the module docstring); ``MalformedResponse`` for a 2xx
        body that is not JSON, ``BadReply`` for one too large or nested too deep."""
        data = json.dumps(body).encode("utf-8")
        started = time.perf_counter()
        raw = await self._request("POST", path, data, self._timeout)
        try:
            decoded = json.loads(raw)
        except UnicodeDecodeError:
            # Bytes that are not UTF-8 (a model's half character): each becomes a lone
            # surrogate here, which ChatReply turns into U+FFFD and flags, as it does an
            # escaped one; the reply is kept rather than retried until it fails.
            decoded = _json_or_malformed(raw.decode("utf-8", "surrogateescape"))
        except ValueError as exc:  # JSONDecodeError
            raise MalformedResponse(f"the body is not JSON ({exc})") from None
        except RecursionError:
            raise _too_deep(len(raw)) from None
        return decoded, time.perf_counter() - started

    async def get(self, path: str, timeout_s: float) -> bytes:
        """``GET base_url+path``: the body; raises as ``post_json`` does."""
        return await self._request("GET", path, None,
                            aiohttp.ClientTimeout(total=timeout_s, sock_connect=timeout_s))

    async def _request(self, method: str, path: str, data: bytes | None,
                       timeout: aiohttp.ClientTimeout) -> bytes:
        """The body of a 2xx reply; any other status or failure as the engine's errors."""
        url = self.base_url + path
        try:
            session = self._open()
            async with session.request(method, url, data=data, headers=self._headers,
                                       timeout=timeout, allow_redirects=False,
                                       proxy=self._proxy[0], proxy_auth=self._proxy[1]) as resp:
                status = resp.status
                headers = {k.lower(): v for k, v in resp.headers.items()}
                raw = await self._read(resp)
        except TimeoutError as exc:  # aiohttp's connect and total timeouts are TimeoutErrors
            # The cause said is the deadline, not the cancellation it made inside aiohttp.
            raise RequestTimeout(f"{method} {url} timed out") from TimeoutError(
                _deadline(exc, timeout))
        except (aiohttp.ClientError, OSError) as exc:
            raise ConnectionFailed(f"{method} {url} failed: connection error") from exc
        if status >= 400:
            raise HTTPStatusError(status, raw, headers)
        return raw

    async def _read(self, resp: aiohttp.ClientResponse) -> bytes:
        """The decoded body, read as it arrives; ``BadReply`` once it passes the cap (the rest
        is never read: leaving the response closes its connection)."""
        cap = self._max_bytes
        if resp.content_length is not None and resp.content_length > cap:
            raise self._too_large(f"{resp.content_length} bytes announced")
        chunks, size = [], 0
        async for chunk in resp.content.iter_any():  # inflated a bounded step at a time
            size += len(chunk)
            if size > cap:
                raise self._too_large("read stopped there")
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, detail: str) -> BadReply:
        return reply_too_large(self._cap_key, self._max_bytes, detail)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _deadline(exc: TimeoutError, timeout: aiohttp.ClientTimeout) -> str:
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return f"not connected within {timeout.sock_connect:g}s"
    return f"no complete reply within {timeout.total:g}s"


def _too_deep(size: int) -> BadReply:
    return BadReply(f"the body ({size} bytes) is JSON nested deeper than the parser's "
                    f"recursion limit", "json_too_deep")


def _json_or_malformed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise MalformedResponse(f"the body is not JSON ({exc})") from None
    except RecursionError:
        raise _too_deep(len(text)) from None


def _env_proxy(base_url: str) -> tuple[Any, Any]:
    """The proxy the environment names for ``base_url`` (HTTP(S)_PROXY, NO_PROXY), as the
    official client honours them. Looked up once: aiohttp's ``trust_env`` would look it up (and
    ``.netrc``) in a worker thread on every request, two thread hops each."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        return get_env_proxy_for_url(URL(base_url))
    except LookupError:
        return None, None
