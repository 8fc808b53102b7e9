"""What the engine did to a model's reply on its way in. Each is recorded in the reply's cache
entry (``ChatReply.flags``) and its details (``true``, only when set), and score counts it as a
diagnostic flag of the row (``rimo_eval.score.diagnostics``): a repair is flagged, never silent.
"""

from __future__ import annotations

UNICODE_REPAIRED = "unicode_repaired"  # lone surrogates became U+FFFD (rimo_eval.io.surrogates)
REDACTED = "redacted"  # the API key was cut out of the text (rimo_eval.chat.redact)
# A usage counter the server sent that is no token count (negative, not an integer, or past
# USAGE_LIMIT) was left out: it would have become a negative or absurd token total and cost.
USAGE_DROPPED = "usage_dropped"
USAGE_LIMIT = 10**12  # tokens in one request: no API comes near it
ENGINE_FLAGS = (UNICODE_REPAIRED, REDACTED, USAGE_DROPPED)
