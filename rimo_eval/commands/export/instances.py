"""The Every Eval Ever 0.3.0 instance rows of a run: one per (item, sample), written as the
predictions tables are read, a row group at a time (never a whole table in memory).

The convention (docs/results_in_other_tools.md), which replay's EEE reader
(rimo_eval/predictors/foreign.py) reads back so that replaying an export reproduces the run:

- ``sample_id`` is the RIMO problem id, ``evaluation_name`` the track, ``metadata.track`` and
  ``metadata.sample`` (the 0-based sample index, as a string: metadata values are strings) say
  which track and sample; ``metadata.status`` is ok, missing or error.
- ``input.raw`` is the problem, ``input.reference`` the gold (RIMO-N: the answer; RIMO-P: the
  reference sub-solutions, one per part); ``sample_hash`` is the schema's sha256 of
  ``input.raw + "".join(input.reference)`` (every_eval_ever's converters' recipe).
- ``output.raw`` is the reply RIMO graded: RIMO-N one text whose last ``\\boxed{}`` is the
  prediction; RIMO-P one text per part asked (stripped, each part's prediction). Where the
  backend kept no reply (oracle, constant, replay of bare answers) or RIMO's extraction of the
  kept text is not the stored prediction, it is made from the prediction (RIMO-N
  ``\\boxed{prediction}``) and ``metadata.output_raw`` says ``prediction``, else ``reply``.
  ``output.reasoning_trace``: the reasoning, one per part for RIMO-P. A missing or failed sample
  has ``output.raw`` empty (its error in ``error``).
- ``evaluation``: RIMO-N score 1/0 (``is_correct``); RIMO-P the prefix score, ``is_correct``
  strict (an ungradable item: 0, false, ``metadata.gradable`` false).
- ``metadata.flags``: the score stage's diagnostics flags set on the row, comma-separated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow.parquet as pq

from rimo_eval.artifacts.flags import FLAGS_N, FLAGS_P
from rimo_eval.artifacts.predictions import (
    RAW_TEXT,
    REASONING,
    STATUS_OK,
    TEXT_COLUMNS,
    join_texts,
    parse_details,
)
from rimo_eval.io.hashing import sha256_bytes
from rimo_eval.io.surrogates import valid_value
from rimo_eval.predictors import extract
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.samples import USAGE_KEYS, sample_usage

if TYPE_CHECKING:
    from rimo_eval.run.files import TableSource

SCHEMA_VERSION = "0.3.0"
BATCH_ROWS = 64  # rows decoded at once: 64 RIMO-P rows of reasoning replies are about 12 MB
HEADLINE = {TRACK_N: "accuracy", TRACK_P: "strict"}  # each row's evaluation_result_id
REPAIRED = "lone UTF-16 surrogates replaced by U+FFFD"


def sample_hash(raw: str, reference: list[str]) -> str:
    """The schema's ``sample_hash``: sha256 of input.raw + input.reference, as every_eval_ever's
    converters compute it (``sha256_string(raw + ''.join(reference))``)."""
    return sha256_bytes((raw + "".join(reference)).encode("utf-8"))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return [v if isinstance(v, str) else None for v in list(value)]


def reply_n(text: str | None, prediction: str) -> tuple[str, bool]:
    """RIMO-N's ``output.raw`` text and whether it is the kept reply (else made from the
    prediction): RIMO's extraction of it must give the prediction back."""
    if text is not None and (extract.extract_boxed(text) or "") == prediction:
        return text, True
    return (f"\\boxed{{{prediction}}}" if prediction else ""), False


def reply_p(parts: list[Any], prediction: list[str]) -> tuple[list[str], bool]:
    """RIMO-P's part texts (each stripped is its prediction) and whether all are the replies."""
    texts, kept = [], True
    for i, pred in enumerate(prediction):
        part = parts[i] if i < len(parts) and isinstance(parts[i], dict) else {}
        text = _text(part.get("text"))
        if text is not None and text.strip() == pred:
            texts.append(text)
        else:
            texts.append(pred)
            kept = False
    return texts, kept


def token_usage(details: dict[str, Any], status: str) -> dict[str, int] | None:
    """EEE's token_usage from the sample's usage; None where the backend counted none."""
    parts = [p for p in details.get("parts") or [] if isinstance(p, dict)]
    if not any(isinstance(d.get("usage"), dict) for d in [details, *parts]):
        return None
    u = sample_usage(details, status)
    prompt, completion = (u[k] for k in USAGE_KEYS[:2])
    return {"input_tokens": prompt, "output_tokens": completion,
            "total_tokens": prompt + completion, "reasoning_tokens": u["reasoning_tokens"]}


class Rows:
    """The fixed parts of every row (ids, model) and the tables rows are looked up in."""

    def __init__(self, evaluation_id: str, model_id: str, items: dict[str, pd.DataFrame],
                 scores: dict[str, pd.DataFrame]) -> None:
        self.evaluation_id, self.model_id = evaluation_id, model_id
        self.items = {t: df.set_index("problem_id", drop=False) for t, df in items.items()}
        self.scores = {t: {(str(r["problem_id"]), int(r.get("sample", 0) or 0)): r
                           for r in df.to_dict("records")} for t, df in scores.items()}

    def row(self, track: str, pred: dict[str, Any]) -> dict[str, Any]:
        pid, j, status = str(pred["problem_id"]), int(pred.get("sample") or 0), pred["status"]
        item = self.items[track].loc[pid]
        score = self.scores[track].get((pid, j), {})
        details = parse_details(pred.get("details"))
        if set(TEXT_COLUMNS) <= pred.keys():
            details = join_texts(track, details, _plain(pred[REASONING]), _plain(pred[RAW_TEXT]))
        ok = status == STATUS_OK and pred.get("prediction") is not None
        meta: dict[str, str] = {"track": track, "sample": str(j), "status": status}
        if track == TRACK_N:
            reference = [str(item["answer"])]
            prediction = str(pred["prediction"]) if ok else ""
            raw, kept = reply_n(_text(details.get("text")), prediction)
            texts = [raw] if ok else []
            thought = _text(details.get(REASONING))
            trace = [thought] if thought is not None else None
            how = [("output.raw[0]", prediction)] if ok else []
            correct = bool(score.get("correct", False))
            evaluation = {"score": float(correct), "is_correct": correct, "num_turns": 1}
            flags = [f for f in FLAGS_N if score.get(f) is True]
        else:
            reference = [str(x) for x in item["sub_solutions"]]
            prediction_p = [str(x) for x in pred["prediction"]] if ok else []
            texts, kept = reply_p(list(details.get("parts") or []), prediction_p)
            reasons = [_text(p.get(REASONING)) if isinstance(p, dict) else None
                       for p in details.get("parts") or []]
            trace = [r or "" for r in reasons] if any(r is not None for r in reasons) else None
            how = [(f"output.raw[{i}]", p) for i, p in enumerate(prediction_p)]
            gradable = bool(item["gradable"])
            strict = gradable and bool(score.get("strict", False))
            prefix = float(score.get("prefix_score") or 0.0) if gradable else 0.0
            evaluation = {"score": prefix, "is_correct": strict, "num_turns": 1}
            meta["gradable"] = str(gradable).lower()
            flags = [f for f in FLAGS_P if score.get(f) is True]
        finish = details.get("finish_reason")
        if isinstance(finish, str):
            meta["finish_reason"] = finish
        if ok:
            meta["output_raw"] = "reply" if kept else "prediction"
        meta["flags"] = ",".join(flags)
        method = (f"rimo-eval {extract.VERSION}: last balanced \\boxed{{}}" if track == TRACK_N
                  else "rimo-eval: the part's reply, stripped")
        if isinstance(details.get("extraction"), str):
            method += f" ({details['extraction']})"
        problem = str(item["problem"])
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION, "evaluation_id": self.evaluation_id,
            "model_id": self.model_id, "evaluation_name": track,
            "evaluation_result_id": f"{track}/{HEADLINE[track]}",
            "sample_id": pid, "sample_hash": sample_hash(problem, reference),
            "interaction_type": "single_turn",
            "input": {"raw": problem, "reference": reference},
            "output": {"raw": texts, "reasoning_trace": trace},
            "messages": None,
            "answer_attribution": [
                {"turn_idx": 0, "source": src, "extracted_value": value,
                 "extraction_method": method, "is_terminal": i == len(how) - 1}
                for i, (src, value) in enumerate(how)],
            "evaluation": evaluation,
            "token_usage": token_usage(details, status),
            "error": _text(pred.get("error")) or None,
            "metadata": meta,
        }
        return out


def line(row: dict[str, Any]) -> bytes:
    """One JSONL line, UTF-8. Model text is arbitrary: NUL and controls are JSON escapes; a lone
    surrogate (which no UTF-8 file holds) is replaced and the row's ``metadata.repaired`` says
    so."""
    text = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        fixed, _ = valid_value(row)
        fixed["metadata"]["repaired"] = REPAIRED
        return (json.dumps(fixed, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def predictions(table: TableSource) -> Iterator[dict[str, Any]]:
    """A predictions table's rows in table order, a row group at a time (each dropped when
    read: see rimo_eval/commands/view/texts.py)."""
    file = pq.ParquetFile(table)
    try:
        for group in range(file.num_row_groups):
            table = file.read_row_group(group)
            batches = table.to_batches(BATCH_ROWS)
            del table
            for batch in batches:
                yield from batch.to_pylist()
            del batches
    finally:
        file.close(force=True)


__all__ = ["HEADLINE", "REPAIRED", "SCHEMA_VERSION", "Rows", "line", "predictions",
           "reply_n", "reply_p", "sample_hash", "token_usage"]
