"""Diagnostic flags of each prediction: why an answer was wrong, never whether it was right.

The benchmark's metric stays exact match (rimo_eval.rimo.grading). These flags explain a score
(an answer left unboxed, a reply cut off, ``\\boxed{\\text{215}}``) and live in their own
columns of the scores tables and under ``<track>.diagnostics`` in metrics.json.

Per RIMO-N row (one item and sample), read from the reply's answer text (``details.text``, the
reply with any reasoning set apart; ``raw_text`` for older details) and finish reason:

* ``no_box``: the reply has no balanced ``\\boxed{...}``;
* ``empty_box``: its last box is empty (a model echoing the prompt's ``\\boxed{}``), so there is
  no answer (the prediction stays ``""``, exact match is unchanged);
* ``multiple_boxes``: its non-empty boxes hold different values (after ``normalise``);
* ``truncated``: the server cut the reply off (``finish_reason: length``), whatever was
  extracted;
* ``gold_in_text``: the gold integer appears in the answer text as a number of its own, but the
  prediction is not right;
* ``not_bare``: a prediction given as it is, with no reply to read it from (a replay line's
  ``prediction``), that is not a bare answer: it holds ``\\boxed{}``, words or LaTeX (``The
  answer is \\boxed{128}.``). Exact match reads it as it is, so it scores wrong: give the
  answer alone, or the whole reply as ``reply`` (read by the extraction);
* ``lenient_match``: the prediction equals the gold after ``normalise``.

A row without a reply (missing, error, or a replay with no text) has every text flag False;
``lenient_match`` only needs the prediction, so a replay gets it too.

Three more flags, on every row of both tracks (RIMO-P: any part), say what the engine did to a
reply on its way in, recorded in its details (``rimo_eval.chat.transport.ChatReply.flags``):

* ``unicode_repaired``: the reply (or the error a server sent) held lone surrogates, each
  replaced by U+FFFD (``rimo_eval.io.surrogates``); the repaired text is what was graded;
* ``redacted``: the API key was cut out of the reply's text (``rimo_eval.chat.redact``), which can
  change what is graded;
* ``usage_dropped``: a usage counter the server sent was no token count (negative, not an
  integer, or absurdly large) and was left out of the token and cost totals.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.artifacts.flags import ENGINE_FLAGS, FLAGS_N, FLAGS_P, NOT_BARE, TEXT_FLAGS_N
from rimo_eval.artifacts.predictions import STATUS_OK, parse_details
from rimo_eval.rimo.boxes import boxes

LENGTH = "length"

# --- MathArena-style normalisation -------------------------------------------------------------
# After eth-sri/matharena, src/matharena/parser.py (normalize_string, remove_invalid_characters,
# remove_inner_boxed, replace_unicode): "$" removed, \text{...} removed and \mathrm{...}
# unwrapped, \, \; \: \! removed, "(\d+),(\d+)" joined, a trailing "." dropped, nested
# \boxed / \fbox unwrapped, U+202F and U+2212 mapped. Two deliberate differences for integer
# answers: a \text{} (or \mathrm, \textbf, \mathbf) holding a digit is unwrapped, not dropped, so
# \boxed{\text{215}} reads 215 (one holding words only, a unit, is dropped as MathArena does);
# only true thousands groups are joined (1,000,000), so a list "1,2" does not become 12.
# MathArena's int() parse also drops a leading "+" and leading zeros: see lenient_equal.

_WRAPPED_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_TEXT = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")
_LATEX_SPACES = re.compile(r"\\[,;:! ]|\\q?quad\b|~")
_UNICODE_SPACES = re.compile("[\u00a0\u2000-\u200b\u202f\u205f\u3000]")
_THOUSANDS = re.compile(r"(?<=\d)[, ](?=\d{3}(?!\d))")
_INTEGER = re.compile(r"[-+]?\d+")
# A bare answer: digits with a sign, separators or a fraction bar, or nothing (no answer).
_BARE = re.compile(r"\s*(?:[-+]?\d[\d.,/ ]*)?\s*")
MAX_UNWRAP = 16  # nesting depth of boxes unwrapped; deeper is not an answer anyway


def _unwrap_boxes(s: str) -> str:
    """Replace each balanced ``\\boxed{X}`` / ``\\fbox{X}`` by X, innermost levels included."""
    for _ in range(MAX_UNWRAP):
        m = _WRAPPED_BOX.search(s)
        if m is None:
            return s
        depth, close = 0, None
        for i in range(m.end() - 1, len(s)):
            depth += {"{": 1, "}": -1}.get(s[i], 0)
            if depth == 0:
                close = i
                break
        if close is None:  # unbalanced: leave the rest as it is
            return s
        s = s[:m.start()] + s[m.end():close] + s[close + 1:]
    return s


def _text_wrapper(m: re.Match[str]) -> str:
    inner = m.group(1)
    return inner if any(ch.isdigit() for ch in inner) else ""


def normalise(answer: str) -> str:
    """An answer as MathArena's parser would read it before parsing (see above)."""
    s = _unwrap_boxes(answer.replace("\u2212", "-"))
    s = _UNICODE_SPACES.sub("", s)
    for _ in range(MAX_UNWRAP):  # nested wrappers, \text{\mathrm{5}}
        s, n = _TEXT.subn(_text_wrapper, s)
        if not n:
            break
    s = s.replace("\\$", "").replace("$", "")
    s = _LATEX_SPACES.sub("", s).replace("{,}", ",")
    s = _THOUSANDS.sub("", s).strip()
    if s.endswith("."):
        s = s[:-1].rstrip()
    if s.startswith("+"):
        s = s[1:].lstrip()
    return s


def lenient_equal(prediction: str | None, gold: str) -> bool:
    """Equal after ``normalise``, or the same integer (``007`` is 7, as ``int()`` reads it)."""
    if prediction is None:
        return False
    a, b = normalise(prediction), normalise(gold)
    if a == b:
        return True
    if not (_INTEGER.fullmatch(a) and _INTEGER.fullmatch(b)):
        return False
    if max(len(a), len(b)) < sys.get_int_max_str_digits():
        return int(a) == int(b)
    # Past Python's int-from-string limit (a 5 MB prediction of digits) int() raises: compare
    # the digit strings without sign noise and leading zeros instead.
    return _canonical_integer(a) == _canonical_integer(b)


def _canonical_integer(s: str) -> str:
    sign = "-" if s.startswith("-") else ""
    digits = s.lstrip("+-").lstrip("0") or "0"
    return digits if digits == "0" else sign + digits


# --- flags ---------------------------------------------------------------------------------------

def answer_text(details: Mapping[str, Any]) -> str | None:
    """The text an answer was extracted from: ``text`` (reasoning set apart), else raw_text."""
    for key in ("text", "raw_text"):
        value = details.get(key)
        if isinstance(value, str):
            return value
    return None


def truncated(details: Mapping[str, Any]) -> bool:
    """Cut off by the length limit: the reply's, or (RIMO-P) any part's, finish reason."""
    parts = [p for p in details.get("parts") or [] if isinstance(p, Mapping)]
    return any(p.get("finish_reason") == LENGTH for p in [details, *parts])


def engine_flags(details: Mapping[str, Any]) -> dict[str, bool]:
    """``ENGINE_FLAGS`` of one row: set in its details or (RIMO-P) in any part's."""
    parts = [p for p in details.get("parts") or [] if isinstance(p, Mapping)]
    return {f: any(d.get(f) is True for d in [details, *parts]) for f in ENGINE_FLAGS}


def gold_in(text: str, gold: str) -> bool:
    """``gold`` appears in ``text`` as a number of its own (not inside 1234 or 0.25), thousands
    separators in the text ignored (1,011 is 1011)."""
    gold = gold.strip()
    if not gold:
        return False
    before = r"(?<![\d.])" if gold.startswith("-") else r"(?<![\d.\-])"
    pattern = before + re.escape(gold) + r"(?!\d|\.\d)"
    return re.search(pattern, _THOUSANDS.sub("", text)) is not None


def not_bare(status: str, text: str | None, prediction: str | None) -> bool:
    """A prediction with no reply behind it that is more than an answer (module docstring)."""
    return (status == STATUS_OK and text is None and prediction is not None
            and _BARE.fullmatch(prediction) is None)


def flags_n(status: str, details: Mapping[str, Any], prediction: str | None, gold: str,
            correct: bool) -> dict[str, bool]:
    """The flags of one RIMO-N row (see the module docstring)."""
    text = answer_text(details) if status == STATUS_OK else None
    found = boxes(text) if text is not None else []
    values = {normalise(b) for b in found if b}
    return {
        "no_box": text is not None and not found,
        "empty_box": bool(found) and found[-1] == "",
        "multiple_boxes": len(values) > 1,
        "truncated": truncated(details),
        "gold_in_text": text is not None and not correct and gold_in(text, gold),
        "not_bare": not_bare(status, text, prediction),
        "lenient_match": lenient_equal(prediction, gold),
        **engine_flags(details),
    }


# --- the metrics block ---------------------------------------------------------------------------

# The text flags every flagged table has (not_bare came later: counted where present).
FIRST_FLAGS_N = tuple(f for f in TEXT_FLAGS_N if f != NOT_BARE)


def has_flags(scores: pd.DataFrame, flags: tuple[str, ...] = FIRST_FLAGS_N) -> bool:
    """Scores tables written before the flags existed have none of the columns (and those
    written before ``ENGINE_FLAGS`` have only the text flags)."""
    return all(f in scores.columns for f in flags)


def counts(scores: pd.DataFrame, flags: tuple[str, ...]) -> dict[str, int]:
    """Each flag's count over every row (item and sample, so up to n x k), where the table
    has its column."""
    return {f: int(scores[f].sum()) for f in flags if f in scores.columns}


def diagnostics_n(scores: pd.DataFrame, first: pd.DataFrame) -> dict[str, Any]:
    """``RIMO-N.diagnostics``: each flag's count over every row, and ``lenient_accuracy`` over
    sample 0 (``first``), beside exact match's accuracy."""
    block: dict[str, Any] = counts(scores, FLAGS_N)
    block["lenient_accuracy"] = (round(float(first["lenient_match"].mean()), 6) if len(first)
                                 else None)
    return block


def diagnostics_p(scores: pd.DataFrame) -> dict[str, int]:
    """``RIMO-P.diagnostics``: each of ``FLAGS_P``'s counts over every row."""
    return counts(scores, FLAGS_P)


def lenient_ratio(first: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap input of lenient_accuracy's interval: (per-item 0/1, ones)."""
    lenient = first["lenient_match"].to_numpy(dtype=float)
    return lenient, np.ones(len(lenient))


__all__ = ["ENGINE_FLAGS", "FLAGS_N", "FLAGS_P", "TEXT_FLAGS_N", "answer_text", "counts",
           "diagnostics_n", "diagnostics_p", "engine_flags", "flags_n", "gold_in", "has_flags",
           "lenient_equal", "lenient_ratio", "normalise", "not_bare", "parse_details", "truncated"]
