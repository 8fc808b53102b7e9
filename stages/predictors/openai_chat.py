"""Chat-model backends: a shared engine (``ChatPredictor``) and the OpenAI-compatible transport.

The engine turns items into chat calls and calls into predictions; a transport only sends one
request. Both backends (``openai`` here, ``local`` in ``local_model``) share the prompt
templates, the ``\\boxed{}`` extraction, the response cache and the RIMO-P chaining:

* RIMO-N: one call; the prediction is the content of the last balanced ``\\boxed{}`` of the
  reply, stripped. A reply with no such box is still status ``ok``, with prediction ``""``
  (never equal to an integer gold, so scored wrong) and ``details.extraction == "none"``.
* RIMO-P (the paper's protocol): one call per sub-problem, in order; call k shows the problem,
  parts 1..k-1 with the model's own proofs as already proved facts, then part k. The
  prediction is the list of the model's replies, stripped. If a part fails for good the item is
  status ``error`` (the parts done so far stay in the cache and in ``details.parts``).
* ``n > 1`` samples: every sample is kept in ``details.samples``; the first one is the
  prediction (and, for RIMO-P, the one passed forward to later parts).
* A request that still fails after its retries marks only its item ``error``; configuration
  failures that would fail every item (401, 403, 404) stop the stage with a ``StageError``.

Details are a pure function of the (cached) replies, so re-running over a warm cache writes
byte-identical predictions. The API key is read from the environment variable named by
``api_key_env`` and only ever handed to the HTTP client; error messages are scrubbed of it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import json
import os
import re
import ssl
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

import openai
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)
from tqdm import tqdm

from stages import TRACK_N, TRACK_P, __version__
from stages.errors import StageError
from stages.items import Item
from stages.predictors import extract
from stages.predictors.base import STATUS_ERROR, Prediction, Predictor
from stages.predictors.cache import DEFAULT_CACHE_DIR, ResponseCache, request_key
from stages.predictors.prompting import rimo_n_messages, rimo_p_messages, template_hashes

PROTOCOL = "rimo-chat-v1"  # bump when the way items become calls changes
T = TypeVar("T")


# --------------------------------------------------------------------------------------------
# Transport interface
# --------------------------------------------------------------------------------------------
@dataclass
class ChatReply:
    """One completed request: a text per sample, plus what the server said about it."""

    texts: list[str]
    finish_reasons: list[str | None]
    usage: dict[str, int]
    model: str | None
    latency_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChatReply:
        return cls(texts=list(data["texts"]), finish_reasons=list(data["finish_reasons"]),
                   usage=dict(data.get("usage") or {}), model=data.get("model"),
                   latency_s=float(data.get("latency_s", 0.0)))


class TransportError(Exception):
    """A request that failed for good. The message is safe to record (no secrets)."""

    request_sha256: str | None = None


class ChatTransport(ABC):
    concurrency: int = 1

    @abstractmethod
    def endpoint(self) -> dict[str, Any]:
        """What answers the requests (server or model file); part of every cache key."""

    @abstractmethod
    def request(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """The complete request for these messages: model, messages, sampling parameters."""

    @abstractmethod
    async def send(self, request: dict[str, Any]) -> ChatReply:
        """Send one request (retrying as the transport sees fit) or raise ``TransportError``."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        pass


# --------------------------------------------------------------------------------------------
# Configuration helpers
# --------------------------------------------------------------------------------------------
def resolve_config(name: str, config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise StageError(f"params.yaml: predict.{name} has unknown keys {unknown}; "
                         f"known: {sorted(defaults)}")
    return {**defaults, **config}


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise StageError(f"params.yaml: {message}")


# Knobs that change speed or robustness, never a reply: kept out of the fingerprint.
OPERATIONAL_KEYS = frozenset({"timeout_s", "max_retries", "backoff_initial_s", "backoff_max_s",
                              "concurrency", "cache_dir", "api_key_env", "n_threads",
                              "model_cache_dir", "model_path"})


# --------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------
class ChatPredictor(Predictor):
    """Shared engine. Subclasses set ``defaults`` and build their transport."""

    defaults: ClassVar[dict[str, Any]]

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.settings = resolve_config(self.name, self.config, self.defaults)
        s = self.settings
        _require(s["system_prompt"] is None or isinstance(s["system_prompt"], str),
                 f"predict.{self.name}.system_prompt must be a string or null")
        _require(s["cache_dir"] is None or isinstance(s["cache_dir"], str),
                 f"predict.{self.name}.cache_dir must be a path or null (no cache)")

    @abstractmethod
    def make_transport(self) -> ChatTransport: ...

    def endpoint_identity(self) -> dict[str, Any]:
        """The part of the transport's endpoint that belongs in the fingerprint."""
        return {}

    def identity(self) -> dict[str, Any]:
        params = {k: v for k, v in self.settings.items() if k not in OPERATIONAL_KEYS}
        return {"backend": self.name, "params": params, "templates": template_hashes(),
                "protocol": PROTOCOL, "extractor": extract.VERSION, "version": __version__,
                **self.endpoint_identity()}

    def predict(self, items: Sequence[Item]) -> list[Prediction]:
        return _run_coroutine(self._predict_all(list(items)))

    # -- the async core ----------------------------------------------------------------------
    async def _predict_all(self, items: list[Item]) -> list[Prediction]:
        for item in items:
            if item.track not in (TRACK_N, TRACK_P):
                raise StageError(f"{item.problem_id}: unknown track {item.track!r}")
        transport = self.make_transport()
        run = _Run(self, transport, ResponseCache(self.settings["cache_dir"]), items)
        try:
            return await run.all()
        finally:
            run.close()
            await transport.aclose()


class _Run:
    """One ``predict`` call: the semaphore, the progress bar and the counters."""

    def __init__(self, predictor: ChatPredictor, transport: ChatTransport,
                 cache: ResponseCache, items: list[Item]) -> None:
        self.transport, self.cache, self.items = transport, cache, items
        self.system_prompt: str | None = predictor.settings["system_prompt"]
        self.semaphore = asyncio.Semaphore(max(1, transport.concurrency))
        calls = sum(1 if it.track == TRACK_N else len(it.sub_problems) for it in items)
        self.bar = tqdm(total=calls, unit="req", desc=f"predict[{predictor.name}]",
                        file=sys.stderr, dynamic_ncols=True, mininterval=0.5, smoothing=0.1)
        self.sent = self.errors = 0
        self.inflight: dict[str, asyncio.Future[ChatReply]] = {}
        self.started = time.monotonic()
        self.label = f"predict[{predictor.name}]"

    async def all(self) -> list[Prediction]:
        try:
            async with asyncio.TaskGroup() as group:  # a StageError cancels the other items
                tasks = [group.create_task(self.one(item)) for item in self.items]
        except ExceptionGroup as failed:
            stage_errors = [e for e in failed.exceptions if isinstance(e, StageError)]
            raise (stage_errors or failed.exceptions)[0] from None
        return [t.result() for t in tasks]

    def close(self) -> None:
        self.bar.close()
        print(f"{self.label}: {len(self.items)} items, {self.cache.hits} cached replies, "
              f"{self.sent} requests sent, {self.errors} items failed, "
              f"{time.monotonic() - self.started:.1f}s", file=sys.stderr)

    async def one(self, item: Item) -> Prediction:
        # One slot per item: RIMO-P parts run in order inside it, items run in parallel.
        async with self.semaphore:
            pred = await (self.rimo_n(item) if item.track == TRACK_N else self.rimo_p(item))
        if pred.status == STATUS_ERROR:
            self.errors += 1
        return pred

    async def call(self, messages: list[dict[str, str]]) -> tuple[ChatReply, str]:
        request = self.transport.request(messages)
        payload = {"endpoint": self.transport.endpoint(), "request": request}
        key = request_key(payload)
        reply = self.cached(key, payload)
        if reply is None:
            # Single flight: two items asking the very same thing share one request.
            task = self.inflight.get(key)
            if task is None:
                task = asyncio.ensure_future(self.fetch(key, payload, request))
                self.inflight[key] = task
                task.add_done_callback(lambda _: self.inflight.pop(key, None))
            reply = await asyncio.shield(task)
        self.bar.update(1)
        return reply, key

    def cached(self, key: str, payload: dict[str, Any]) -> ChatReply | None:
        entry = self.cache.get(key, payload)
        if entry is None:
            return None
        try:
            reply = ChatReply.from_json(entry)
        except (KeyError, TypeError, ValueError):
            return None  # an entry of the right shape but wrong content: refetch
        return reply if reply.texts else None

    async def fetch(self, key: str, payload: dict[str, Any],
                    request: dict[str, Any]) -> ChatReply:
        self.sent += 1
        try:
            reply = await self.transport.send(request)
        except TransportError as exc:
            exc.request_sha256 = key
            raise
        # fsync off the event loop; awaited, so an item is done only once its reply is durable
        await asyncio.to_thread(self.cache.put, key, payload, reply.to_json())
        return reply

    async def rimo_n(self, item: Item) -> Prediction:
        try:
            reply, key = await self.call(rimo_n_messages(item, self.system_prompt))
        except TransportError as exc:
            self.bar.update(1)
            return Prediction(item.track, item.problem_id, None, STATUS_ERROR, str(exc),
                              {"request_sha256": exc.request_sha256})
        answers = [extract.extract_boxed(t) for t in reply.texts]
        details = _reply_details(reply, key)
        details["extraction"] = "none" if answers[0] is None else "boxed"
        if len(reply.texts) > 1:
            details["samples"] = [
                {"raw_text": t, "finish_reason": f, "answer": a}
                for t, f, a in zip(reply.texts, reply.finish_reasons, answers, strict=True)
            ]
        return Prediction(item.track, item.problem_id, answers[0] or "", details=details)

    async def rimo_p(self, item: Item) -> Prediction:
        proved: list[str] = []
        parts: list[dict[str, Any]] = []
        total = len(item.sub_problems)
        for index in range(total):
            messages = rimo_p_messages(item, index, proved, self.system_prompt)
            try:
                reply, key = await self.call(messages)
            except TransportError as exc:
                self.bar.update(total - index)  # the remaining parts will not be asked
                return Prediction(item.track, item.problem_id, None, STATUS_ERROR,
                                  f"part {index + 1} of {total}: {exc}",
                                  {"parts": parts, "failed_request_sha256": exc.request_sha256})
            part = _reply_details(reply, key)
            if len(reply.texts) > 1:
                part["samples"] = [{"raw_text": t, "finish_reason": f}
                                   for t, f in zip(reply.texts, reply.finish_reasons, strict=True)]
            parts.append(part)
            proved.append(reply.texts[0].strip())
        return Prediction(item.track, item.problem_id, proved, details={"parts": parts})


def _reply_details(reply: ChatReply, key: str) -> dict[str, Any]:
    return {"request_sha256": key, "raw_text": reply.texts[0],
            "finish_reason": reply.finish_reasons[0], "usage": reply.usage,
            "latency_s": round(reply.latency_s, 4), "model": reply.model}


def _run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Called from inside a running loop (a notebook): give the coroutine a loop of its own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


# --------------------------------------------------------------------------------------------
# OpenAI-compatible transport
# --------------------------------------------------------------------------------------------
_SLOTS_PER_CLIENT = 8
DUMMY_API_KEY = "EMPTY"  # what local servers (vLLM, llama.cpp) accept when they need none
_FATAL_STATUS = {401: "authentication failed", 403: "permission denied",
                 404: "not found (check base_url and model)"}


def normalise_base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StageError(f"params.yaml: predict.openai.base_url {url!r} is not an http(s) URL")
    if parts.username or parts.password or parts.query:
        # Credentials must come from the environment, never from params (they would be hashed,
        # cached and written into the predictions).
        raise StageError("params.yaml: predict.openai.base_url must not carry credentials or a "
                         "query string; put the key in the variable named by api_key_env")
    return url.rstrip("/")


def is_local_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private


def resolve_api_key(env_name: str | None, base_url: str) -> str:
    key = os.environ.get(env_name) if env_name else None
    if key:
        return key
    if env_name and not is_local_url(base_url):
        raise StageError(f"environment variable {env_name} (predict.openai.api_key_env) is not "
                         f"set, and {base_url} is not a local server")
    return DUMMY_API_KEY


class Redactor:
    """Removes the API key, and anything shaped like a bearer token, from text."""

    _TOKENS = re.compile(r"(Bearer\s+)\S+|\bsk-[A-Za-z0-9_\-*.]{4,}", re.IGNORECASE)

    def __init__(self, secret: str) -> None:
        self._secret = secret if secret and secret != DUMMY_API_KEY else None

    def __call__(self, text: str) -> str:
        return self._TOKENS.sub(lambda m: f"{m.group(1) or ''}[REDACTED]", self.exact(text))

    def exact(self, text: str) -> str:
        """Only the key itself: for model output, where token-shaped words are legitimate."""
        return text.replace(self._secret, "[REDACTED]") if self._secret else text


class MalformedResponse(Exception):
    """HTTP 200 with a body that is not a usable chat completion (retried)."""


def is_retryable(exc: BaseException) -> bool:
    """429, 408/409, 5xx, timeouts, dropped connections and garbled bodies are transient."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return isinstance(exc, MalformedResponse | openai.APIResponseValidationError
                      | json.JSONDecodeError)


def _retry_after_s(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class OpenAITransport(ChatTransport):
    """``AsyncOpenAI`` with its own retries off: tenacity retries instead (see ``send``)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        s = settings
        self.base_url = normalise_base_url(s["base_url"] or "https://api.openai.com/v1")
        self.concurrency = int(s["concurrency"])
        self._model: str = s["model"]
        self._sampling = {k: s[k] for k in ("temperature", "top_p", "max_tokens", "seed")
                          if s[k] is not None}
        if int(s["n"]) != 1:
            self._sampling["n"] = int(s["n"])
        self._extra_body: dict[str, Any] = dict(s["extra_body"] or {})
        self._attempts = int(s["max_retries"]) + 1
        self._wait = wait_random_exponential(multiplier=float(s["backoff_initial_s"]),
                                             max=float(s["backoff_max_s"]))
        self._backoff_max = float(s["backoff_max_s"])
        key = resolve_api_key(s["api_key_env"], self.base_url)
        self._redact = Redactor(key)
        # Several clients, each serving at most _SLOTS_PER_CLIENT requests at a time: the HTTP
        # pool scans all its connections on every request and release, which at 64 connections
        # in one pool costs more CPU than the whole rest of a request.
        # Over plain http one shared TLS context (used only if redirected to https) spares each
        # client loading the CA store; https keeps the client's own defaults.
        shared_tls = ssl.create_default_context() if self.base_url.startswith("http:") else None
        clients = [openai.AsyncOpenAI(
            api_key=key, base_url=self.base_url, timeout=float(s["timeout_s"]), max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(verify=shared_tls) if shared_tls else None,
        ) for _ in range(-(-self.concurrency // _SLOTS_PER_CLIENT))]
        self._clients = clients
        self._slots: asyncio.Queue[openai.AsyncOpenAI] = asyncio.Queue()
        for i in range(self.concurrency):
            self._slots.put_nowait(clients[i % len(clients)])

    def endpoint(self) -> dict[str, Any]:
        # base_url is part of the key: a model name alone ("default", "gpt-oss") does not say
        # which weights answer, and a cache must never serve another server's reply. The cost
        # is that moving the same model to another URL starts a cold cache.
        return {"transport": "openai-chat", "base_url": self.base_url}

    def request(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self._model, "messages": messages, **self._sampling}
        if self._extra_body:
            request["extra_body"] = self._extra_body
        return request

    def _backoff(self, state: RetryCallState) -> float:
        # Full jitter spreads 64 workers that hit the same 429 burst; honour Retry-After.
        wait = self._wait(state)
        hint = _retry_after_s(state.outcome.exception() if state.outcome else None)
        return max(wait, min(hint, self._backoff_max)) if hint else wait

    async def send(self, request: dict[str, Any]) -> ChatReply:
        kwargs = dict(request)
        extra_body = kwargs.pop("extra_body", None)
        attempts = 0
        try:
            async for attempt in AsyncRetrying(stop=stop_after_attempt(self._attempts),
                                               wait=self._backoff, reraise=True,
                                               retry=retry_if_exception(is_retryable)):
                with attempt:
                    attempts += 1
                    client = await self._slots.get()
                    try:
                        started = time.perf_counter()
                        response = await client.chat.completions.create(
                            **kwargs, extra_body=extra_body)
                        latency = time.perf_counter() - started
                    finally:
                        self._slots.put_nowait(client)
                    reply = _parse(response, latency)
                    reply.texts = [self._redact.exact(t) for t in reply.texts]  # echoed key
                    return reply
        except openai.APIStatusError as exc:
            if exc.status_code in _FATAL_STATUS:
                raise StageError(f"{self.base_url}: HTTP {exc.status_code} "
                                 f"{_FATAL_STATUS[exc.status_code]}: "
                                 f"{self._redact(str(exc))[:300]}") from None
            raise TransportError(self._describe(exc, attempts)) from None
        except (openai.OpenAIError, MalformedResponse, ValueError) as exc:
            raise TransportError(self._describe(exc, attempts)) from None
        raise AssertionError("unreachable")  # AsyncRetrying either returns or raises

    def _describe(self, exc: BaseException, attempts: int) -> str:
        text = f"{type(exc).__name__}: {exc}"
        return self._redact(f"failed after {attempts} attempt(s): {text}")[:500]

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()


def _parse(response: Any, latency_s: float) -> ChatReply:
    try:
        choices = sorted(response.choices or [], key=lambda c: c.index or 0)
        texts = [c.message.content or "" for c in choices]
        finish = [c.finish_reason for c in choices]
        usage = response.usage.model_dump(exclude_none=True) if response.usage else {}
    except (AttributeError, TypeError) as exc:
        raise MalformedResponse(f"unexpected response shape: {exc}") from None
    if not texts:
        raise MalformedResponse("the response has no choices")
    usage = {k: v for k, v in usage.items() if isinstance(v, int)}  # drop nested breakdowns
    return ChatReply(texts, finish, usage, getattr(response, "model", None), latency_s)


class OpenAIPredictor(ChatPredictor):
    """``predict.backend: openai`` - any OpenAI-compatible chat-completions server."""

    name = "openai"
    defaults: ClassVar[dict[str, Any]] = {
        "base_url": "http://127.0.0.1:8000/v1",  # null: https://api.openai.com/v1
        "model": None,
        "temperature": 0.0,
        "top_p": None,  # null: not sent (the server's default)
        "max_tokens": None,
        "seed": None,
        "n": 1,
        "extra_body": {},
        "system_prompt": None,
        "timeout_s": 600.0,
        "max_retries": 6,
        "backoff_initial_s": 1.0,
        "backoff_max_s": 60.0,
        "concurrency": 16,
        "api_key_env": "OPENAI_API_KEY",
        "cache_dir": str(DEFAULT_CACHE_DIR),
    }

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        s = self.settings
        _require(isinstance(s["model"], str) and bool(s["model"]),
                 "predict.openai.model must name the served model")
        _require(isinstance(s["n"], int) and s["n"] >= 1, "predict.openai.n must be >= 1")
        _require(isinstance(s["concurrency"], int) and s["concurrency"] >= 1,
                 "predict.openai.concurrency must be an integer >= 1")
        _require(isinstance(s["max_retries"], int) and s["max_retries"] >= 0,
                 "predict.openai.max_retries must be an integer >= 0")
        _require(isinstance(s["extra_body"], dict | None),
                 "predict.openai.extra_body must be a mapping")
        _require(s["api_key_env"] is None or isinstance(s["api_key_env"], str),
                 "predict.openai.api_key_env must be the NAME of an environment variable")
        try:
            json.dumps(s["extra_body"], allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise StageError(f"params.yaml: predict.openai.extra_body is not JSON: {exc}") from exc
        normalise_base_url(s["base_url"] or "https://api.openai.com/v1")

    def make_transport(self) -> ChatTransport:
        return OpenAITransport(self.settings)
