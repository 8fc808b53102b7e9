"""A model's training cutoff as params and tools write it (``score.training_cutoff``,
``--cutoff RUN=DATE``): one parser, used by the params check, the score stage and the tools."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rimo_eval.errors import ConfigError

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


def parse_cutoffs(values: Sequence[str] | None) -> dict[str, str]:
    """``--cutoff RUN=DATE`` (repeatable) -> {RUN: DATE}; a bad one names the option."""
    out: dict[str, str] = {}
    for value in values or ():
        run, sep, date = value.partition("=")
        try:
            text = cutoff_text(date) if sep and run else None
        except ValueError as exc:
            raise ConfigError(f"--cutoff {value}: {exc}") from None
        if text is None:
            raise ConfigError(f"--cutoff {value}: expected RUN=DATE (DATE: YYYY, YYYY-MM or "
                              "YYYY-MM-DD)")
        out[run] = text
    return out


def known_cutoff(names: Iterable[str], own: str | None, cutoffs: Mapping[str, str]
                 ) -> str | None:
    """A run's cutoff: ``--cutoff`` under any of its ``names``, else ``own``, its own
    ``score.training_cutoff`` (ScoreParams has checked it); None where neither says."""
    for name in names:
        if name in cutoffs:
            return cutoffs[name]
    return own


__all__ = ["CUTOFF_FORMAT", "cutoff_text", "cutoff_year", "known_cutoff", "parse_cutoffs"]
