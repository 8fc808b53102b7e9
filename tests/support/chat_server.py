"""A fake OpenAI-compatible chat server on 127.0.0.1, for tests and benchmarks.

It speaks real HTTP (``POST /v1/chat/completions``), so the backend is driven through the
official ``openai`` client. Behaviour is chosen per prompt by directives written into the
problem text (they survive into every prompt built from it):

``[[gold:X]]``          reply with reasoning ending in ``\\boxed{X}``
``[[fail:CODE:K]]``     the first K attempts of this exact request get HTTP CODE (K ``*``: all)
``[[drop:K]]``          the first K attempts: connection closed without a response
``[[hang:K]]``          the first K attempts: no response until ``hang_s`` passes (a timeout)
``[[malformed:K]]``     the first K attempts: HTTP 200 with a body that is not JSON
``[[empty:K]]``         the first K attempts: HTTP 200 with ``"choices": []``
``[[echo_auth]]``       HTTP 400 whose message quotes the Authorization header (redaction test)
``[[think:X]]``         content opens with ``<think>…\boxed{X}…</think>`` before the answer
``[[think_open:X]]``    content is an unclosed ``<think>…\boxed{X}…`` cut off (``length``)
``[[reasoning:X]]``     the reasoning, holding ``\boxed{X}``, goes in ``reasoning_content``
                        (``reasoning_field`` names another field), counted as reasoning tokens
``[[truncate]]``        ``finish_reason: length`` and a reply with no box
``[[cut]]``             ``finish_reason: length``, the reply otherwise as it would be
``[[context]]``         HTTP 400 "maximum context length", as OpenAI and vLLM send it
``[[by_seed:A,B,...]]`` the gold is the list entry at ``seed % len`` (samples that differ)

Without ``gold`` the reply is ``Solution <hash>.``, a deterministic function of the prompt, so
RIMO-P chaining can be checked (request k must contain the replies to requests 1..k-1).
Server-wide: ``responder(body, prompt)``, when set and returning a string, is the reply (a
scripted judge; fault directives still come first); ``shape(completion, prompt)``, when set
and returning something, is the body sent instead of the completion built (a dict, sent as
JSON with every non-ASCII character escaped, as servers do, or bytes sent as they are), a
``(status, body)`` pair, or a ``Written`` reply that writes itself (``hostile_replies``: a
gzip bomb, a trickle of one byte at a time): hostile replies; ``latency_s`` before every reply, and
``hang_after``: once that many requests were answered, later ones hang (used to kill a client
at a known point); ``fail_all``: every request gets that HTTP status (a broken server);
``die_after``: once that many were answered the server dies (listener closed, later requests on
open connections dropped). ``reasoning_model`` acts as OpenAI's reasoning models do: HTTP 400
naming the parameter for ``max_tokens`` and for a ``temperature`` other than 1. ``GET
/v1/models`` lists the model unless ``serve_models`` is off (then 404, as on servers without
it): ``model_card`` when set (vLLM's has ``id``, the served name, and ``root``, the weights),
else one model named ``fake``. Every chat request is recorded; ``answered`` counts only
replies written completely.
``GET /_requests?since=N`` returns ``{"next": M, "requests": [...]}``: the bodies of the chat
requests answered completely among records N..M-1 (M: the records so far), so that a benchmark
running the server in its own process reads back what a run sent (``since`` omitted: M alone).
Reply size (benchmarks at reasoning scale): ``reasoning_bytes`` gives every reply that many
characters of reasoning in ``reasoning_field`` (words drawn from the prompt's hash, so they
compress like text, not like a repeated string), and ``answer_bytes`` pads the answer to that
many characters before it ends (the ``\boxed{}`` stays last, so extraction is unchanged).
``BlackHole`` is a server that accepts connections and never answers.

Run standalone (for benchmarks in a separate process):
``python -m tests.support.chat_server --latency 0.2`` (in the repository root) prints the base
URL on its first line and serves until killed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs, urlsplit

from tests.support.loopback import (
    LoopbackHandler,
    RecordingFake,
    bind_loopback,
    directives,
    first_k,
    serve_until_interrupted,
)


@runtime_checkable
class Written(Protocol):
    """A reply that writes itself on the handler (headers, pacing); ``stop`` is set when the
    server stops (``tests/support/hostile_replies.py``)."""

    def write(self, handler: LoopbackHandler, stop: threading.Event) -> None: ...


# What ``ChatServer.shape`` may return instead of the completion: a body, (status, body), or
# a reply that writes itself.
Shaped = dict[str, Any] | bytes | tuple[int, dict[str, Any] | bytes] | Written | None


def request_log(base_url: str, since: int | None = None) -> dict[str, Any]:
    """``GET /_requests`` of a server running elsewhere (another process): the bodies it
    answered from record ``since`` on, and the index of its next record. No proxy: loopback."""
    url = base_url.removesuffix("/v1") + "/_requests"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url if since is None else f"{url}?since={since}", timeout=60) as resp:
        return json.load(resp)


def request_fingerprint(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def prompt_text(body: dict[str, Any]) -> str:
    users = [m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""


def echo_reply(prompt: str, seed: int | None = None) -> str:
    text = prompt if seed is None else f"{prompt}#seed={seed}"
    return f"Solution {hashlib.sha256(text.encode()).hexdigest()[:12]}."


def openai_reasoning_rejection(body: dict[str, Any]) -> dict[str, Any] | None:
    """The error body OpenAI's reasoning models send for ``max_tokens`` or ``temperature``."""
    if "max_tokens" in body:
        return {"message": "Unsupported parameter: 'max_tokens' is not supported with this "
                "model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                "param": "max_tokens", "code": "unsupported_parameter"}
    if "temperature" in body and body["temperature"] != 1:
        return {"message": f"Unsupported value: 'temperature' does not support "
                f"{body['temperature']} with this model. Only the default (1) value is "
                "supported.", "type": "invalid_request_error", "param": "temperature",
                "code": "unsupported_value"}
    return None


@dataclass
class Record:
    body: dict[str, Any] | None
    key: str
    prompt: str
    headers: dict[str, str]
    started: float
    outcome: str = "pending"  # ok | http-CODE | drop | hanging/hang | malformed | empty | ...
    reply: str | None = None
    finished: float | None = None  # an answer: just before its first byte went out
    attempt: int = 0  # arrivals of this exact body so far, this one included


@dataclass
class ChatServer(RecordingFake):
    latency_s: float = 0.0
    hang_s: float = 30.0
    hang_after: int | None = None
    reasoning_model: bool = False
    reasoning_field: str = "reasoning_content"
    fail_all: int | None = None
    die_after: int | None = None
    serve_models: bool = True
    model_card: dict[str, Any] | None = None
    reasoning_bytes: int = 0
    answer_bytes: int = 0
    responder: Callable[[dict[str, Any], str], str | None] | None = None
    shape: Callable[[dict[str, Any], str], Shaped] | None = None
    records: list[Record] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.dead = False
        self.model_probes = 0

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- inspection ------------------------------------------------------------------------
    def answered_since(self, since: int | None) -> dict[str, Any]:
        """``GET /_requests``: the bodies answered among records ``since``.. (None: none).

        A reply is logged ``ok`` just after its bytes went out, so a client can read it and ask
        for the log first: a record still ``pending`` is waited for (briefly), not left out."""
        deadline = time.monotonic() + 2.0
        while True:
            with self._lock:
                end = len(self.records)
                start = end if since is None else min(max(since, 0), end)
                window = self.records[start:end]
                if time.monotonic() > deadline or all(r.outcome != "pending" for r in window):
                    return {"next": end, "requests": [r.body for r in window
                                                      if r.outcome == "ok"]}
            time.sleep(0.005)

    # -- behaviour -------------------------------------------------------------------------
    def _die_now(self) -> bool:
        """True once ``die_after`` answers were given; the first caller closes the listener."""
        with self._lock:
            if self.die_after is None or self._answered < self.die_after:
                return False
            first, self.dead = not self.dead, True
        if first and self._httpd is not None:
            httpd = self._httpd

            def die() -> None:
                httpd.shutdown()
                httpd.server_close()  # new connections are now refused

            threading.Thread(target=die, daemon=True).start()
        return True


def _make_handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(LoopbackHandler):
        disable_nagle_algorithm = True  # else Nagle + delayed ACK add 40 ms to every reply

        def do_POST(self) -> None:
            self._serve(*self._read_request())

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/_requests":
                since = parse_qs(url.query).get("since")
                self._json(200, server.answered_since(int(since[0]) if since else None))
                return
            if server._die_now():
                self._drop()
                return
            with server._lock:
                server.model_probes += 1
            if self.path.rstrip("/").endswith("/models") and server.serve_models:
                card = server.model_card or {"id": "fake", "object": "model"}
                self._json(200, {"object": "list", "data": [card]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def _read_request(self) -> tuple[Any, dict[str, str]]:
            """The JSON body (None if it is not JSON) and the lower-cased headers."""
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            return body, {k.lower(): v for k, v in self.headers.items()}

        def _serve(self, body: Any, headers: dict[str, str]) -> None:
            if server._die_now():
                self._drop()
                return
            if not self.path.endswith("/chat/completions") or not isinstance(body, dict):
                rec = Record(None, "", "", headers, time.monotonic())
                server._begin(rec)
                self._json(404 if isinstance(body, dict) else 400, {"error": {"message": "bad"}})
                server._finish(rec, "bad-request")
                return
            prompt = prompt_text(body)
            rec = Record(body, request_fingerprint(body), prompt, headers, time.monotonic())
            over = server._begin(rec)
            attempt, d = rec.attempt, directives(prompt)
            if server.latency_s:
                time.sleep(server.latency_s)
            if over or ("hang" in d and first_k(d["hang"], attempt)):
                with server._lock:
                    rec.outcome = "hanging"  # until hang_s passes or the server stops
                server._stop.wait(server.hang_s)
                self._drop()
                server._finish(rec, "hang")
                return
            if server.fail_all is not None:
                self._json(server.fail_all, {"error": {"message": "injected", "type": "x"}})
                server._finish(rec, f"http-{server.fail_all}")
                return
            if "drop" in d and first_k(d["drop"], attempt):
                self._drop()
                server._finish(rec, "drop")
                return
            if "fail" in d:
                code, _, k = d["fail"].partition(":")
                if first_k(k, attempt):
                    self._json(int(code), {"error": {"message": f"injected {code}",
                                                     "type": "injected"}})
                    server._finish(rec, f"http-{code}")
                    return
            if "echo_auth" in d:
                msg = f"rejected credentials: {headers.get('authorization', '')}"
                self._json(400, {"error": {"message": msg, "type": "invalid_request_error"}})
                server._finish(rec, "http-400")
                return
            rejection = openai_reasoning_rejection(body) if server.reasoning_model else None
            if rejection is not None:
                self._json(400, {"error": rejection})
                server._finish(rec, "http-400")
                return
            if "context" in d:
                self._json(400, {"error": {
                    "message": "This model's maximum context length is 2048 tokens. However, "
                    "your messages resulted in 3017 tokens. Please reduce the length.",
                    "type": "invalid_request_error", "param": "messages",
                    "code": "context_length_exceeded"}})
                server._finish(rec, "http-400")
                return
            if "malformed" in d and first_k(d["malformed"], attempt):
                self._send(200, b'{"id": "x", "choices": [ {"mess', "application/json")
                server._finish(rec, "malformed")
                return
            if "empty" in d and first_k(d["empty"], attempt):
                self._json(200, _completion(body, []))
                server._finish(rec, "empty")
                return
            gold = d.get("gold")
            if "by_seed" in d:
                golds = d["by_seed"].split(",")
                gold = golds[int(body.get("seed") or 0) % len(golds)]
            scripted = server.responder(body, prompt) if server.responder else None
            reply = scripted if scripted is not None else (
                f"Working through it carefully, the answer is \\boxed{{{gold}}}."
                if gold is not None else echo_reply(prompt, body.get("seed")))
            finish, reasoning = "stop", None
            if "think" in d:
                reply = f"<think>\nMaybe \\boxed{{{d['think']}}}? Check again.\n</think>\n\n{reply}"
            if "think_open" in d:
                reply = f"<think>\nFirst guess \\boxed{{{d['think_open']}}}, but wait"
                finish = "length"
            if "truncate" in d:
                reply, finish = "Let me start by considering the case n = 1, then", "length"
            if "cut" in d:
                finish = "length"
            if "reasoning" in d:
                reasoning = f"Hmm, perhaps \\boxed{{{d['reasoning']}}}. No: recount."
            if server.reasoning_bytes:
                reasoning = filler(prompt, server.reasoning_bytes, reasoning or "")
            if server.answer_bytes > len(reply):
                pad = filler(prompt + "answer", server.answer_bytes - len(reply) - 1)
                reply = f"{pad} {reply}"
            n = int(body.get("n") or 1)
            texts = [reply] + [f"{reply} (sample {i})" for i in range(1, n)]
            # Stamped before the write: once the client has the reply it may send the next
            # request (RIMO-P's next part) before this thread runs again.
            sent_at = time.monotonic()
            completion = _completion(body, texts, finish, reasoning, server.reasoning_field)
            shaped = server.shape(completion, prompt) if server.shape else None
            status = 200
            if isinstance(shaped, tuple):
                status, shaped = shaped
            try:
                if isinstance(shaped, Written):
                    shaped.write(self, server._stop)
                elif isinstance(shaped, bytes):  # a body as it is, UTF-8 or not
                    self._send(status, shaped, "application/json")
                else:  # JSON escapes (ensure_ascii): a lone surrogate goes out as \ud800
                    self._json(status, completion if shaped is None else shaped)
            except OSError:
                server._finish(rec, "client-gone")
                return
            server._finish(rec, "ok" if status == 200 else f"http-{status}", reply, at=sent_at)

        def _json(self, code: int, obj: dict[str, Any]) -> None:
            self._send(code, json.dumps(obj).encode(), "application/json")

    return Handler


class BlackHole:
    """Accepts TCP connections and never reads or answers: a wedged server."""

    def __init__(self) -> None:
        self._sock = bind_loopback(lambda addr: socket.create_server(addr, backlog=1024))
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()

    def start(self) -> BlackHole:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        self._sock.settimeout(0.05)
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                self._conns.append(self._sock.accept()[0])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"

    def stop(self) -> None:
        self._stop.set()
        for conn in [*self._conns, self._sock]:
            conn.close()


_WORDS = ("so", "the", "sum", "is", "odd", "hence", "let", "n", "be", "prime", "then", "p",
          "divides", "k^2", "+", "1", "and", "we", "check", "small", "cases", "wait", "no",
          "modulo", "4", "gives", "a", "contradiction", "therefore", "it", "holds", "for", "all")


def filler(seed: str, size: int, tail: str = "") -> str:
    """``size`` characters of text-like words, a function of ``seed``, ending with ``tail``."""
    digest = hashlib.sha256(seed.encode()).digest()
    words, n, i = [], len(tail), 0
    while n <= size:  # the joined words (one space fewer than counted) reach ``size``
        b = digest[i % 32] ^ (i * 31 % 251)
        word = _WORDS[b % len(_WORDS)] + (str(b) if b % 7 == 0 else "")
        words.append(word)
        n += len(word) + 1
        i += 1
    body = " ".join(words)[: max(0, size - len(tail))]
    if body.endswith(" "):  # no whitespace at the edges: clients strip it
        body = body[:-1] + "."
    return (body + tail)[:max(size, len(tail))]


def _completion(body: dict[str, Any], texts: list[str], finish: str = "stop",
                reasoning: str | None = None, reasoning_field: str = "reasoning_content"
                ) -> dict[str, Any]:
    """Token counts are word counts: prompt words, reply words (+ reasoning words)."""
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    reasoning_tokens = len(reasoning.split()) if reasoning else 0
    completion_tokens = sum(len(t.split()) for t in texts) + reasoning_tokens
    message_extra = {reasoning_field: reasoning} if reasoning else {}
    usage_extra = ({"completion_tokens_details": {"reasoning_tokens": reasoning_tokens}}
                   if reasoning else {})
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": t, **message_extra},
             "finish_reason": finish}
            for i, t in enumerate(texts)
        ],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens, **usage_extra},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--reasoning-bytes", type=int, default=0,
                        help="characters of reasoning in every reply (default: none)")
    parser.add_argument("--answer-bytes", type=int, default=0,
                        help="pad every answer to this many characters (default: as it is)")
    args = parser.parse_args(argv)
    server = ChatServer(latency_s=args.latency, reasoning_bytes=args.reasoning_bytes,
                        answer_bytes=args.answer_bytes).start()
    serve_until_interrupted(server.base_url, server.stop)


if __name__ == "__main__":
    main()
