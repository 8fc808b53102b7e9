"""Secret scrubbing for text that may be recorded: error messages, logs, model output.

An API key is only ever handed to the HTTP client; anything that quotes it (a server's error
message, a reply echoing the ``Authorization`` header) goes through a ``Redactor`` first.
"""

from __future__ import annotations

import re

DUMMY_API_KEY = "EMPTY"  # what local servers (vLLM, llama.cpp) accept when they need none


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
