"""What a failed provider call means, as plain data: the classifiers of the native backends
(``anthropic/translate.py``, ``gemini/translate.py``) return an ``ErrorDecision`` that the
transport maps onto the engine's errors. No import from the rest of ``rimo_eval``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any


@dataclass(frozen=True)
class ErrorDecision:
    """What a failed call means. ``action``: ``retry`` | ``fatal`` | ``parameter`` | ``item``."""

    action: str
    message: str
    status: int | None = None
    retry_after_s: float | None = None
    param: str | None = None  # the request parameter a 400 names
    params_key: str | None = None  # the params.yaml key to change
    kind: str | None = None  # details.error_kind of an item error
    # Why a retry without a status: "connection", "timeout" or "malformed" (the engine's
    # ConnectionFailed, RequestTimeout, MalformedResponse).
    cause: str | None = None

    @property
    def retryable(self) -> bool:
        return self.action == "retry"


def retry_after_s(headers: Any) -> float | None:
    """``retry-after-ms``, else ``retry-after`` in seconds or as an HTTP date (what the
    anthropic SDK itself honours; https://platform.claude.com/docs/en/api/rate-limits)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(float(ms) / 1000, 0.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            when: datetime = parsedate_to_datetime(value)
            return max((when - datetime.now(UTC)).total_seconds(), 0.0)
    except (TypeError, ValueError):
        return None
