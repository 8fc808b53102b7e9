"""Secret scrubbing for text that may be recorded: error messages, logs, model output.

An API key is only ever handed to the HTTP client; anything that quotes it (a server's error
message, a reply echoing the ``Authorization`` header) goes through a ``Redactor`` first.

Errors and logs lose the key whatever it looks like, and anything shaped like a bearer token.
Model text is graded, so it loses only a key that looks like a secret (``looks_secret``): local
servers are commonly started with keys such as ``x``, ``none``, ``sk-local`` or ``token``, and
cutting every "x" out of the replies turned ``\\boxed{7}`` into ``\\bo[REDACTED]ed{7}`` and the
accuracy into 0. Such a key is announced once (never printed) and left in the text; a reply
that redaction did change is flagged ``redacted`` (``rimo_eval.chat.reply_flags``; the retrying
transport sets it), a diagnostic flag in score.
"""

from __future__ import annotations

import re
import sys

from rimo_eval.io.terminal import for_terminal

DUMMY_API_KEY = "EMPTY"  # what local servers (vLLM, llama.cpp) accept when they need none
# A key is a secret worth cutting out of model text when it is at least this long and made of
# at least this many distinct characters. Provider keys are far longer (OpenAI's, DeepSeek's,
# Anthropic's, Gemini's and OpenRouter's have 35 characters or more) and random: such a string
# does not occur in a reply by chance, while the words and numbers a model writes are shorter
# or repetitive (a run of 16 zeros is not a secret).
MIN_SECRET_CHARS = 16
MIN_SECRET_DISTINCT = 6
_warned: set[str] = set()


def looks_secret(key: str) -> bool:
    """Long and varied enough that it cannot be ordinary text (see ``MIN_SECRET_CHARS``)."""
    return len(key) >= MIN_SECRET_CHARS and len(set(key)) >= MIN_SECRET_DISTINCT


class Redactor:
    """Removes the API key, and anything shaped like a bearer token, from text.

    ``source`` names where the key came from (``OPENAI_API_KEY (predict.openai.api_key_env)``),
    for the one warning about a key too short to be cut out of model text."""

    _TOKENS = re.compile(r"(Bearer\s+)\S+|\bsk-[A-Za-z0-9_\-*.]{4,}", re.IGNORECASE)

    def __init__(self, secret: str, source: str | None = None) -> None:
        self._secret = secret if secret and secret != DUMMY_API_KEY else None
        self._in_text = self._secret if self._secret and looks_secret(self._secret) else None
        if self._secret and self._in_text is None and source and source not in _warned:
            _warned.add(source)
            print(for_terminal(
                f"rimo-eval: warning: the API key in {source} is too short or too repetitive "
                f"to be a secret (one has at least {MIN_SECRET_CHARS} characters, "
                f"{MIN_SECRET_DISTINCT} of them distinct), so it is not cut out of the model's "
                "replies and no answer changes; errors and logs still never show it"),
                file=sys.stderr)

    def __call__(self, text: str) -> str:
        """For errors and logs: the key whatever its length, and token-shaped words."""
        text = text.replace(self._secret, "[REDACTED]") if self._secret else text
        return self._TOKENS.sub(lambda m: f"{m.group(1) or ''}[REDACTED]", text)

    def model_text(self, text: str) -> str:
        """For model output, which is graded: only a key that looks like a secret, and never
        token-shaped words (legitimate in a reply)."""
        return text.replace(self._in_text, "[REDACTED]") if self._in_text else text
