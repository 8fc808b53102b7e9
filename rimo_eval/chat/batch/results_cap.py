"""The bound on a batch's results download (issue 42 §3): per line, not in total.

A results file is legitimately large in total (one line per request, up to 100,000 lines of
replies), so a total cap would either refuse honest batches or bound nothing. Each line is one
request's result, though: a reply (``max_reply_bytes`` decoded, as online) in its envelope
(``custom_id``, status, usage), which ``ENVELOPE_BYTES`` allows for. The download is streamed
and only the lines of the batch's own keys are kept, so memory is bounded by the batch's size,
never by what the server sends. A line past the bound stops the stage, naming the batch: it
cannot be tied to its request, and fetching it again would give the same.
"""

from __future__ import annotations

from rimo_eval.chat.capped_http import Cap
from rimo_eval.chat.errors import BadReply
from rimo_eval.errors import StageError
from rimo_eval.params.chat import AnthropicParams, OpenAIParams

ENVELOPE_BYTES = 1 << 20  # a result's fields around its reply, far above any real one


def results_cap(params: OpenAIParams | AnthropicParams, section: str) -> Cap:
    return Cap(None, f"{section}.max_reply_bytes (plus {ENVELOPE_BYTES} bytes per result)",
               max_line_bytes=params.max_reply_bytes + ENVELOPE_BYTES)


def results_too_large(section: str, batch_id: str, exc: BadReply) -> StageError:
    return StageError(f"{section}.batch: the results of batch {batch_id} were not read: {exc}. "
                      f"No honest result is that large; raise {section}.max_reply_bytes if "
                      "this one is")
