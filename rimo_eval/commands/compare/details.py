"""What a flip shows beyond right/wrong, and the params diff of the two runs.

A RIMO-N flip carries the gold and both predictions straight from the scores tables. A RIMO-P
flip carries which parts each side matched (``✓✓✗``), and, where the predictions and items of
both runs are in the local DVC cache, the first part on which the two differ: its reference
sub-solution and both candidates, shortened (they are proofs). Texts are untrusted model output:
the renderers escape them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.artifacts.flat_keys import flatten
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

SNIPPET = 80  # characters of a proof part shown in a flip


def snippet(text: Any, limit: int = SNIPPET) -> str:
    """One line of at most ``limit`` characters (an ellipsis says it was cut)."""
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return ""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _text(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def n_flip_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """Gold and both predictions of one paired RIMO-N row (None: no prediction)."""
    return {"gold": _text(row.get("gold_a")), "prediction_a": _text(row.get("prediction_a")),
            "prediction_b": _text(row.get("prediction_b"))}


def _marks(matched: Any) -> str:
    if matched is None or (isinstance(matched, float) and np.isnan(matched)):
        return ""
    return "".join("✓" if bool(m) else "✗" for m in matched)


def p_flip_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"matched_a": _marks(row.get("matched_a")), "matched_b": _marks(row.get("matched_b"))}


def first_difference(a: str, b: str) -> int:
    """The first part whose match differs between the two sides (0 when none does)."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), 0)


def _sample0(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["sample"] == 0] if "sample" in frame.columns else frame


def attach_p_texts(flips: Sequence[dict[str, Any]], items: pd.DataFrame | None,
                   preds_a: pd.DataFrame | None, preds_b: pd.DataFrame | None) -> None:
    """Add ``part``, ``gold``, ``prediction_a``, ``prediction_b`` (shortened) to RIMO-P flips,
    from the first sample of each side's predictions and A's items. Nothing is added when one
    of the tables could not be read."""
    if items is None or preds_a is None or preds_b is None:
        return
    gold = dict(zip(items["problem_id"], items["sub_solutions"], strict=True))
    pa = dict(zip(*(_sample0(preds_a)[c] for c in ("problem_id", "prediction")), strict=True))
    pb = dict(zip(*(_sample0(preds_b)[c] for c in ("problem_id", "prediction")), strict=True))

    def part(table: Mapping[str, Any], pid: str, i: int) -> str | None:
        value = table.get(pid)
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return None
        return snippet(value[i]) if i < len(value) else None

    for flip in flips:
        pid = flip["problem_id"]
        i = first_difference(flip.get("matched_a", ""), flip.get("matched_b", ""))
        flip.update({"part": i + 1, "gold": part(gold, pid, i),
                     "prediction_a": part(pa, pid, i), "prediction_b": part(pb, pid, i)})


def flip_cells(track: str, flip: Mapping[str, Any]) -> list[str]:
    """The cells after problem_id and domain: A, B, gold, A's and B's prediction."""
    def right(x: bool) -> str:
        return "right" if x else "wrong"

    def shown(text: Any) -> str:
        return "(none)" if text is None else repr(text) if track == TRACK_N else text

    a, b = right(flip["a"]), right(flip["b"])
    if track == TRACK_P and flip.get("matched_a") is not None:
        a, b = f"{a} {flip['matched_a']}", f"{b} {flip['matched_b']}"
    gold = shown(flip.get("gold")) if "gold" in flip else "-"
    if track == TRACK_P and "part" in flip:
        gold = f"part {flip['part']}: {gold}"
    return [a, b, gold, shown(flip.get("prediction_a")) if "prediction_a" in flip else "-",
            shown(flip.get("prediction_b")) if "prediction_b" in flip else "-"]


FLIP_HEAD = ["problem_id", "domain", "A", "B", "gold", "A's prediction", "B's prediction"]


def params_diff(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None
                ) -> list[dict[str, Any]]:
    """Every params.yaml key whose value differs between the two runs (``-`` where one side
    lacks it), in sorted key order; empty when a side has no params file."""
    if a is None or b is None:
        return []
    fa, fb = flatten(dict(a)), flatten(dict(b))
    rows = []
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key, "-"), fb.get(key, "-")
        if va != vb:
            rows.append({"param": key, "a": va, "b": vb})
    return rows


__all__ = ["FLIP_HEAD", "SNIPPET", "attach_p_texts", "first_difference", "flip_cells",
           "n_flip_fields", "p_flip_fields", "params_diff", "snippet"]
