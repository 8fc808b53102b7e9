"""One cheap look at the endpoint before the first request is sent: a server that is down, a
host that does not resolve or a TLS handshake that fails stops the stage in seconds, with the
base URL and the cause, instead of every item burning its retries and ending as an error.

Only those three causes stop the stage. Any HTTP answer at all (a 404 from a server without
``/models``, a 401 that the first real request will report properly) proves that something is
listening, and a probe that times out is only a warning: a busy server may be slow to list its
models, and a server that never answers is shown by the progress bar's stall warning.

The same ``GET /models`` says what the server serves behind the model name (``identity``), which
``rimo_eval.chat.served`` puts into the cache key.
"""

from __future__ import annotations

import math
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from rimo_eval.chat.errors import ConnectionFailed, RequestTimeout
from rimo_eval.errors import StageError
from rimo_eval.io.hashing import sha256_bytes
from rimo_eval.io.surrogates import is_valid
from rimo_eval.io.terminal import for_terminal

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
            print(for_terminal(f"{section}: WARNING: {base_url} did not answer GET /models "
                               f"within {wait_s:g}s; starting anyway"), file=sys.stderr)


Identity = dict[str, Any]
_FIELDS = ("root", "parent")
_LONGEST = 1024  # a longer value is kept as its hash: it is in every entry's request


def identity(models: Any, name: str) -> Identity:
    """What a ``GET /models`` body says about the weights behind ``name``, beyond the name
    (``rimo_eval.chat.served`` puts it in the cache key): the card of that name's ``root``
    and ``parent`` where they differ from it, its ``meta``; or, where no card has that name
    and the server lists one model, that model's ``id`` too (a server that answers every
    name with its one model)."""
    data = models.get("data") if isinstance(models, dict) else None
    cards = [c for c in data if isinstance(c, dict)] if isinstance(data, list) else []
    card = next((c for c in cards if c.get("id") == name), None)
    out: Identity = {}
    if card is None:
        if len(cards) != 1:
            return {}
        card = cards[0]  # the one model a server answers every name with
        out["id"] = _text(card.get("id"))
    for field in _FIELDS:
        if card.get(field) != name:
            out[field] = _text(card.get(field))
    meta = card.get("meta")
    if isinstance(meta, dict) and meta:  # llama.cpp: vocabulary, parameters, bytes
        out["meta"] = {k: v for k, v in list(meta.items())[:32] if isinstance(k, str)
                       and len(k) <= 64 and is_valid(k) and _scalar(v)}
    return {k: v for k, v in out.items() if v not in (None, "", {})}


def _scalar(value: Any) -> bool:
    return (isinstance(value, int | bool) or (isinstance(value, float) and math.isfinite(value))
            or (isinstance(value, str) and len(value) <= 256 and is_valid(value)))


def _text(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    if len(value) > _LONGEST or not is_valid(value):
        return "sha256:" + sha256_bytes(value.encode("utf-8", "surrogatepass"))
    return value
