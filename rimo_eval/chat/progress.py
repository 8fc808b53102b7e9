"""The progress bar of a chat run: requests done, requests in flight and the age of the oldest
one, and a loud stall warning when nothing has finished for ``stall_warning_s`` seconds.

A server that accepts connections and never answers would otherwise sit silent at 0% for
``timeout_s`` x attempts; with the in-flight count and age on the bar, and the warning, the
user sees within minutes that the requests are stuck, not slow.
"""

from __future__ import annotations

import asyncio
import sys
import time

from tqdm import tqdm

from rimo_eval.io.terminal import for_terminal

_TICK_S = 1.0


class Progress:
    def __init__(self, total: int, label: str, stall_warning_s: float | None) -> None:
        self.label = label
        self.bar = tqdm(total=total, unit="req", desc=label, file=sys.stderr,
                        dynamic_ncols=True, mininterval=0.5, smoothing=0.1)
        self.stall_warning_s = stall_warning_s
        self.inflight: dict[int, float] = {}  # token -> start (monotonic)
        self._next = 0
        self.last_done = time.monotonic()
        self.warnings = 0
        self._watch: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin watching (needs the running loop)."""
        self._watch = asyncio.get_running_loop().create_task(self._watcher())

    def begin(self) -> int:
        self._next += 1
        self.inflight[self._next] = time.monotonic()
        return self._next

    def end(self, token: int) -> None:
        self.inflight.pop(token, None)
        self.last_done = time.monotonic()
        self.warnings = 0  # progress again: the next stall gets its own warning

    def update(self, n: int = 1) -> None:
        self.bar.update(n)

    def postfix(self, now: float) -> str:
        if not self.inflight:
            return ""
        oldest = now - min(self.inflight.values())
        return f"in flight {len(self.inflight)}, oldest {oldest:.0f}s"

    def check(self, now: float) -> str | None:
        """The stall warning due at ``now``, if any (at most one per stall period)."""
        idle = now - self.last_done
        # Repeated every stall_warning_s while the stall lasts.
        if not self.stall_warning_s or not self.inflight or (
                idle < self.stall_warning_s * (self.warnings + 1)):
            return None
        self.warnings += 1
        return (f"{self.label}: WARNING: no request has finished for {idle:.0f}s "
                f"({len(self.inflight)} in flight, oldest {now - min(self.inflight.values()):.0f}s)"
                f"; the server may be stuck. Requests time out after timeout_s and are retried.")

    async def _watcher(self) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            now = time.monotonic()
            self.bar.set_postfix_str(self.postfix(now), refresh=False)
            warning = self.check(now)
            if warning:
                # Printed even with the bar disabled (TQDM_DISABLE, no terminal).
                tqdm.write(for_terminal(warning), file=sys.stderr)

    @staticmethod
    def note(text: str) -> None:
        """One line on stderr above the bar (not torn into it), even with the bar disabled."""
        tqdm.write(for_terminal(text), file=sys.stderr)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        # The last tick's "in flight" is stale once the run is over; the final bar omits it.
        self.bar.set_postfix_str(self.postfix(time.monotonic()), refresh=False)
        self.bar.close()
