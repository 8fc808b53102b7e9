"""A decoded-size cap on the replies the SDK transports read (issue 42 §3): the anthropic and
google-genai SDKs, and the batch downloads (OpenAI's ``files.content``, Anthropic's results
stream), read and inflate a body inside httpx, out of the engine's reach. So the count is made
in the httpx transport they are given (``client_args``): ``CappedTransport`` inflates the
body itself, a bounded step at a time (httpx's own decoders, which never inflate more than
1 MiB per step), counts what comes out and stops at the cap with ``BadReply``
(``reply_too_large``, that item's error, never retried), before the SDK holds the rest. The
SDK sees an identity body: nothing is inflated twice.

``Cap.max_line_bytes`` bounds each line instead, for a JSONL results file, which is
legitimately large in total (see ``batch/``). ``capped`` sets another cap for the calls made
inside it (a batch's download through the online transport's client).

With a transport of its own, httpx reads no proxy from the environment; ``client_args`` mounts
a capped proxy transport for each one the environment names, as httpx itself would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx2
from httpx2._decoders import MultiDecoder  # the SDKs' own bounded inflaters
from httpx2._utils import get_environment_proxies

from rimo_eval.chat.errors import BadReply, reply_too_large


@dataclass(frozen=True)
class Cap:
    """``max_bytes`` decoded in all (None: no total), ``max_line_bytes`` between two newlines
    (None: no line bound); ``key``: the params key that sets it, named in the error."""

    max_bytes: int | None
    key: str
    max_line_bytes: int | None = None

    def too_large(self, detail: str) -> BadReply:
        return reply_too_large(self.key, int(self.max_bytes or 0), detail)

    def line_too_large(self) -> BadReply:
        return BadReply(f"a line of the reply is larger than {self.key} = "
                        f"{self.max_line_bytes} bytes decoded (read stopped there)",
                        "reply_too_large")


_OVERRIDE: ContextVar[Cap | None] = ContextVar("rimo_eval_reply_cap", default=None)


@contextmanager
def capped(cap: Cap) -> Iterator[None]:
    """``cap`` instead of the transport's own for the requests sent inside (this task)."""
    token = _OVERRIDE.set(cap)
    try:
        yield
    finally:
        _OVERRIDE.reset(token)


class CappedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, cap: Cap, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._cap = cap
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        cap = _OVERRIDE.get() or self._cap
        response = await self._inner.handle_async_request(request)
        encodings = [e.strip().lower() for e in
                     response.headers.get_list("content-encoding", split_commas=True)]
        encodings = [e for e in encodings if e and e != "identity"]
        length = response.headers.get("content-length", "")
        if (cap.max_bytes is not None and not encodings and length.isdigit()
                and int(length) > cap.max_bytes):
            await response.aclose()  # never read: closing drops the connection
            raise cap.too_large(f"{length} bytes announced")
        headers = response.headers
        decoder = None
        if encodings:
            decoder = MultiDecoder(encodings)
            headers = httpx2.Headers([(k, v) for k, v in response.headers.multi_items()
                                      if k.lower() not in ("content-encoding",
                                                           "content-length")])
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        return httpx2.Response(response.status_code, headers=headers,
                               stream=_Counted(stream, decoder, cap),
                               extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Counted(httpx2.AsyncByteStream):
    """The body decoded, counted piece by piece; ``BadReply`` once past the cap."""

    def __init__(self, raw: httpx2.AsyncByteStream, decoder: MultiDecoder | None, cap: Cap
                 ) -> None:
        self._raw, self._decoder, self._cap = raw, decoder, cap
        self._size = self._line = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._raw:
            for piece in self._decode(chunk):
                self._count(piece)
                yield piece
        if self._decoder is not None:
            for piece in self._decoder.flush():
                self._count(piece)
                yield piece

    def _decode(self, chunk: bytes) -> Iterable[bytes]:
        return (chunk,) if self._decoder is None else self._decoder.decode(chunk)

    def _count(self, piece: bytes) -> None:
        cap = self._cap
        self._size += len(piece)
        if cap.max_bytes is not None and self._size > cap.max_bytes:
            raise cap.too_large("read stopped there")
        if cap.max_line_bytes is not None:
            first, *rest = piece.split(b"\n")
            self._line += len(first)
            for part in rest:
                if self._line > cap.max_line_bytes:
                    break
                self._line = len(part)
            if self._line > cap.max_line_bytes:
                raise cap.line_too_large()

    async def aclose(self) -> None:
        await self._raw.aclose()


def client_args(cap: Cap) -> dict[str, Any]:
    """``httpx2.AsyncClient`` keyword arguments that put every request under ``cap``: the
    capped transport, and one per proxy the environment names (``HTTPS_PROXY``, ``NO_PROXY``),
    which a client given a transport would no longer read itself."""
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {
        pattern: None if url is None
        else CappedTransport(cap, httpx2.AsyncHTTPTransport(proxy=url))
        for pattern, url in get_environment_proxies().items()}
    return {"transport": CappedTransport(cap), "mounts": mounts}


def bad_reply_in(exc: BaseException) -> BadReply | None:
    """The ``BadReply`` an SDK wrapped (``APIConnectionError from BadReply``), if any."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, BadReply):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
