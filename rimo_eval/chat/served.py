"""What the server serves behind the model name: part of the cache key (issue 42 §6).

Two servers on one URL under one name (a sweep reusing a name and port on a node, new weights
behind an old name) answer differently, and a key of URL, name and request alone served the
first one's replies to the second. So before its first lookup a run asks the server once
(``GET /models``, the probe's request) and puts what it reports about the weights behind the
name, beyond the name itself, into every key: vLLM's and SGLang's ``root`` (the weights' path
or repository) and ``parent`` (a LoRA's base), llama.cpp's ``meta`` (the weights' sizes), and
the one model a server lists when it answers every name with it (llama_cpp.server). A
server that reports nothing more (OpenAI, vLLM without ``--served-model-name``, where the name
is the root, a server without ``/models``) adds nothing, so the keys it had stay as they were
and its cache keeps hitting.

What was reported last is kept per (model, endpoint) in the cache's ``served`` table: a run
that sees something else says so once, a run that cannot reach the server (a warm cache and no
server) and the offline readers (``--estimate``, ``view --partial``, ``--export-batch``) use it.

The price of never serving other weights' replies: entries stored without a report (by an
older rimo-eval, or imported from batch files, which carry none) are not served to a server
that now reports its weights; they are requested again once. Guessing that those entries were
made with today's weights is exactly the mistake this module is there to prevent.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Callable

from rimo_eval.chat.cache import ResponseCache, labels
from rimo_eval.chat.probe import Identity as Identity
from rimo_eval.chat.transport import ChatTransport
from rimo_eval.io.hashing import canonical_json
from rimo_eval.io.terminal import for_terminal


def _where(transport: ChatTransport, name: str) -> tuple[str, str]:
    return labels({"endpoint": transport.endpoint(), "request": {"model": name}})


def recorded(cache: ResponseCache, transport: ChatTransport) -> Identity:
    """What the server reported last (``{}``: nothing, or never asked): for a reader that
    asks no server."""
    name = transport.served_name()
    if name is None:
        return {}
    return _recorded(cache, *_where(transport, name)) or {}


def _recorded(cache: ResponseCache, model: str, endpoint: str) -> Identity | None:
    conn = cache.connection()
    if conn is None:
        return None
    try:
        row = conn.execute("SELECT identity FROM served WHERE model = ? AND endpoint = ?",
                           (model, endpoint)).fetchone()
    except sqlite3.OperationalError:  # a cache made before the table (read-only here)
        return None
    found: Identity | None = None if row is None else json.loads(row[0])
    return found


async def resolve(cache: ResponseCache, transport: ChatTransport, section: str,
                  say: Callable[[str], None] | None = None) -> Identity:
    """The identity a run's keys hold: asked of the server, else the one recorded; a change
    from the recorded one is said once (``say``, default stderr) and recorded."""
    name = transport.served_name()
    if name is None:
        return {}
    reported = await transport.served_identity()
    if cache.root is None:
        # No cache (cache_dir null) is an operational choice: the keys, which the predictions
        # record, must be the ones a run with a cache makes.
        return reported or {}
    model, endpoint = _where(transport, name)
    with cache.guard():
        last = _recorded(cache, model, endpoint)
        if reported is None:  # the server did not answer: as it was last
            return last or {}
        if last is None and not reported:
            return {}  # nothing to keep: such a server's keys are what they always were
        if last != reported:
            if last is not None:
                (say or _stderr)(
                    f"{section}: the server at {endpoint} now reports other weights under "
                    f"{name!r} than when this cache last asked ({_said(last)} then, "
                    f"{_said(reported)} now): only replies made with these weights are "
                    f"served from the cache, the others are requested again")
            conn = cache.connection(create=True)
            assert conn is not None
            conn.execute("INSERT INTO served VALUES (?, ?, ?, ?) ON CONFLICT (model, endpoint) "
                         "DO UPDATE SET identity = excluded.identity, since = excluded.since",
                         (model, endpoint, canonical_json(reported), time.time()))
    return reported


def _stderr(text: str) -> None:
    print(for_terminal(text), file=sys.stderr)


def _said(found: Identity) -> str:
    # JSON with every non-ASCII character escaped: a server's text reaches the terminal
    # without a control character in it.
    return ", ".join(f"{k} {json.dumps(v, ensure_ascii=True, sort_keys=True)}"
                     for k, v in sorted(found.items())) or "nothing"
