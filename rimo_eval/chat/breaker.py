"""A circuit breaker over finished requests: when the last ``window`` requests all failed at
the transport level (after their retries), the server is gone or broken for everyone, and
going on would only mark every remaining item as an error after minutes of retries.

Requests that failed for a reason of their own (a 400 for one over-long prompt) are not
transport failures and reset nothing either way; a success resets the count. Replies already
received stay in the response cache, so a re-run resumes where this one stopped.
"""

from __future__ import annotations

from rimo_eval.errors import StageError


class CircuitBreaker:
    """``window``: the section's ``breaker_window`` (its default is ``EngineParams``')."""

    def __init__(self, window: int | None, label: str, key: str) -> None:
        self.window = window if window else 0  # 0 / None: never trips
        self.label = label
        self.key = key  # the params key that sets the window, named in the error
        self.failures = 0  # consecutive transport-level failures
        self.tripped: str | None = None

    def success(self) -> None:
        self.failures = 0

    def failure(self, message: str, *, transient: bool) -> None:
        """Count one failed request; raise ``StageError`` once ``window`` failed in a row."""
        if not transient:
            return
        self.failures += 1
        if self.window and self.failures >= self.window and self.tripped is None:
            self.tripped = (f"{self.label}: the last {self.failures} requests all failed at the "
                            f"transport level; stopping instead of failing every item "
                            f"({self.key} = {self.window}). Last error: "
                            f"{message}. Replies received so far stay cached: fix the server "
                            f"and re-run to resume.")
        if self.tripped is not None:
            raise StageError(self.tripped)
