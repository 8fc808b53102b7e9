"""The chat engine: a room of its own, with no RIMO in it (nothing here imports
``rimo_eval.predictors``, ``rimo_eval.score`` or ``rimo_eval.judge``;
tests/engine/test_engine_room.py checks).

* ``transport``: what a transport is (``ChatTransport``: request -> ``ChatReply`` or
  ``TransportError``) and what the cache key hashes; ``openai/`` (any OpenAI-compatible server,
  over aiohttp) and ``llama/`` (llama.cpp in-process) are the transports.
* ``session``: one run over a transport (the public API): response cache, single flight,
  concurrency, probe, circuit breaker, progress; ``reasoning``: reasoning apart from answers.
* ``cache``, ``breaker``, ``probe``, ``progress``, ``redact``: the parts a session is made of.

The RIMO protocol (prompts, ``\\boxed{}`` extraction, RIMO-P chaining) is ``rimo_eval.predictors``
on top; the judge is another caller of ``session``.
"""
