"""The RIMO-N answer extractor: the content of the last ``\\boxed{...}`` with balanced braces.

The box rules live in rimo_eval.rimo.boxes (score's diagnostics read replies with the same
scanner). ``extract_boxed`` returns ``None`` when there is no balanced box; an empty
``\\boxed{}`` (a model echoing the prompt's "inside \\boxed{}") gives ``""``, which stays the
prediction (so exact match is unchanged) but is reported as ``extraction: "empty_box"``.
"""

from __future__ import annotations

from rimo_eval.rimo.boxes import boxes

VERSION = "last-balanced-boxed-v1"  # part of the predictor fingerprint: bump on any rule change

# details.extraction of a RIMO-N reply, see extraction_kind.
BOXED, EMPTY_BOX, TRUNCATED, NONE = "boxed", "empty_box", "truncated", "none"


def extraction_kind(box: str | None, finish_reason: str | None) -> str:
    """How the answer was read: ``boxed``; ``empty_box`` (the last box is empty: not an answer);
    ``truncated`` (no box, the reply was cut off by the length limit); ``none``."""
    if box:
        return BOXED
    if box is not None:
        return EMPTY_BOX
    return TRUNCATED if finish_reason == "length" else NONE


def extract_boxed(text: str | None) -> str | None:
    """The stripped content of the last top-level balanced ``\\boxed{...}``, or ``None``."""
    found = boxes(text)
    return found[-1].strip() if found else None
