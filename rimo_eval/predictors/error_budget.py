"""``predict.allow_errors``: how many items may end in an error before the run counts as failed.

A handful of permanent errors (one RIMO-P part longer than the context) should not throw away
a paid run, so up to the allowed share the stage passes but says so loudly; the count reaches
the metrics through score's per-track ``errors``. Above it the stage fails, naming the
commonest error, before anything is written (every reply received is in the response cache, so
the re-run after a fix costs nothing for them).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable

from rimo_eval.artifacts.predictions import STATUS_ERROR, Prediction
from rimo_eval.errors import StageError
from rimo_eval.io.terminal import for_terminal

# "part 2 of 3: failed after 7 attempt(s): X": the same cause, whatever part or attempt count
_NOISE = re.compile(r"^part \d+ of \d+: |failed after \d+ attempt\(s\): ")


def error_kind(message: str | None) -> str:
    return _NOISE.sub("", message or "(no message)")[:200]


def check_error_budget(preds: Iterable[Prediction], allow: float, unit: str = "items") -> int:
    """The number of failed predictions; raises ``StageError`` when their share exceeds
    ``allow`` (validated in ``rimo_eval.params.config``). ``unit`` names what was counted: with
    ``predict.samples`` k > 1 each (item, sample) is one."""
    preds = list(preds)
    failed = [p for p in preds if p.status == STATUS_ERROR]  # "missing": replay of a subset
    if not failed:
        return 0
    kinds = Counter(error_kind(p.error) for p in failed)
    common, count = kinds.most_common(1)[0]
    share = len(failed) / len(preds)
    summary = (f"{len(failed)} of {len(preds)} {unit} ({share:.1%}) ended in an error; "
               f"the commonest ({count}x): {common}")
    if share > allow or len(failed) == len(preds):
        # Every one failing is a failed run even at allow_errors = 1: exit 0 with no answer
        # would read as a model that got everything wrong.
        why = (f"more than predict.allow_errors = {allow:g}" if share > allow else
               "every one failed, whatever predict.allow_errors")
        raise StageError(f"predict: {summary}. That is {why}; nothing was written. Replies "
                         f"received are cached, so a re-run after the fix only sends the "
                         f"failed requests.")
    print(for_terminal(f"predict: WARNING: {summary} (within predict.allow_errors = "
                       f"{allow:g}; scored as wrong, counted as errors in the metrics)"),
          file=sys.stderr)
    return len(failed)
