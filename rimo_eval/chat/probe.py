"""One cheap look at the endpoint before the first request is sent: a server that is down, a
host that does not resolve or a TLS handshake that fails stops the stage in seconds, with the
base URL and the cause, instead of every item burning its retries and ending as an error.

Only those three causes stop the stage. Any HTTP answer at all (a 404 from a server without
``/models``, a 401 that the first real request will report properly) proves that something is
listening, and a probe that times out is only a warning: a busy server may be slow to list its
models, and a server that never answers is shown by the progress bar's stall warning.
"""

from __future__ import annotations

import socket
import ssl
import sys
from collections.abc import Awaitable, Callable, Iterator
from urllib.parse import urlsplit

from rimo_eval.chat.errors import ConnectionFailed, RequestTimeout
from rimo_eval.errors import StageError

PROBE_TIMEOUT_S = 10.0


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def connection_cause(exc: BaseException, base_url: str) -> str | None:
    """"connection refused at URL: ..." when the failure is one that no retry will fix soon."""
    host = urlsplit(base_url).hostname or base_url
    for err in _chain(exc):
        if isinstance(err, ConnectionRefusedError):
            return f"connection refused at {base_url}: is the server running?"
        if isinstance(err, socket.gaierror):
            return f"DNS lookup of {host!r} failed for {base_url}: {err.strerror or err}"
        if isinstance(err, ssl.SSLError | ssl.CertificateError):
            return f"TLS handshake with {base_url} failed: {err}"
    return None


def root_cause(exc: BaseException) -> str:
    """The innermost exception of the chain, e.g. ``ServerDisconnectedError: ...``."""
    *_, root = _chain(exc)
    return f"{type(root).__name__}: {root}" if root is not exc else str(exc)


async def probe_endpoint(call: Callable[[], Awaitable[object]], base_url: str, wait_s: float,
                         section: str) -> None:
    """Run ``call`` (e.g. ``GET {base_url}/models`` through the transport's own client).

    Raises ``StageError`` only for a refused connection, a DNS failure or a TLS failure.
    """
    try:
        await call()
    except Exception as exc:  # any answer other than the three causes is fine
        cause = connection_cause(exc, base_url) if isinstance(exc, ConnectionFailed) else None
        if cause is not None:
            raise StageError(cause) from None
        if isinstance(exc, RequestTimeout):
            print(f"{section}: WARNING: {base_url} did not answer GET /models within "
                  f"{wait_s:g}s; starting anyway", file=sys.stderr)
