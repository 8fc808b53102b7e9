"""The diagnostic flags of the scores tables: one list, which the score stage writes and the
view and the report read (rimo_eval.score.diagnostics says what each flag means).

Their order is the scores tables' column order and metrics.json's: it is part of the artifacts.
"""

from __future__ import annotations

from rimo_eval.chat.reply_flags import ENGINE_FLAGS

LENIENT = "lenient_match"  # right after normalisation: a diagnostic, never the metric
NOT_BARE = "not_bare"  # a replayed prediction given as more than an answer (\\boxed{}, words)
TEXT_FLAGS_N = ("no_box", "empty_box", "multiple_boxes", "truncated", "gold_in_text", NOT_BARE,
                LENIENT)
FLAGS_N = (*TEXT_FLAGS_N, *ENGINE_FLAGS)
FLAGS_P = ("truncated", *ENGINE_FLAGS)

# The flags that can explain a wrong RIMO-N answer (all but LENIENT), the most telling first: a
# gold in the text says more than a missing box. The report lists wrong rows in this order.
_TELLING = (NOT_BARE, "gold_in_text", "empty_box", "multiple_boxes", "no_box", "truncated")
EXPLAINING_N = tuple(sorted((f for f in FLAGS_N if f != LENIENT),
                            key=lambda f: _TELLING.index(f) if f in _TELLING else len(_TELLING)))

__all__ = ["ENGINE_FLAGS", "EXPLAINING_N", "FLAGS_N", "FLAGS_P", "LENIENT", "NOT_BARE",
           "TEXT_FLAGS_N"]
