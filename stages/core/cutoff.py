"""A model's training cutoff as params and tools write it (``score.training_cutoff``,
``--cutoff RUN=DATE``): one parser, used by the params check, the score stage and the tools."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

CUTOFF_FORMAT = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


def cutoff_text(value: Any) -> str | None:
    """The cutoff as text: ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD`` (YAML reads ``2024`` as a
    number and ``2024-06-01`` as a date; both are taken); None stays None."""
    if value is None:
        return None
    if isinstance(value, dt.date):
        return value.isoformat()[:10]
    text = str(value).strip()
    if isinstance(value, bool) or not CUTOFF_FORMAT.match(text):
        raise ValueError(f"a date YYYY, YYYY-MM or YYYY-MM-DD, got {value!r}")
    return text


def cutoff_year(value: Any) -> int | None:
    text = cutoff_text(value)
    return None if text is None else int(text[:4])


__all__ = ["CUTOFF_FORMAT", "cutoff_text", "cutoff_year"]
