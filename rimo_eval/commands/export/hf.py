"""The ``.eval_results/rimo.yaml`` a Hugging Face model repo carries (the hub's Eval Results:
one list entry per score, each naming the benchmark dataset, the value, the date and the
source), from a run's primary metrics: RIMO-N accuracy, RIMO-P strict, prefix score and
sub-problem accuracy, in percent, each entry's notes giving its interval and n.

Deterministic: the date is the run's commit date, never today's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rimo_eval.commands.export.eee import _get, confidence
from rimo_eval.commands.export.source import ExportRun
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

FILE = Path(".eval_results/rimo.yaml")
# (track, metric, task id): the primary metrics, headline first.
PRIMARY = ((TRACK_N, "accuracy", "rimo_n_accuracy"), (TRACK_P, "strict", "rimo_p_strict"),
           (TRACK_P, "prefix_score", "rimo_p_prefix_score"),
           (TRACK_P, "sub_problem_accuracy", "rimo_p_sub_problem_accuracy"))


def percent(value: float) -> float:
    return round(100 * value, 2)


def source_url(run: ExportRun) -> str:
    repo = _get(run.params, "fetch.repo") or "ziye2chen/RIMO"
    rev = _get(run.params, "fetch.revision") or "main"
    return f"https://github.com/{repo}/tree/{rev}"


def entries(run: ExportRun, dataset_id: str, url: str | None) -> list[dict[str, Any]]:
    date = (run.date or "")[:10] or None
    k = {t: int((run.metrics.get(t) or {}).get("k") or 1) for t in (TRACK_N, TRACK_P)}
    out = []
    for track, metric, task in PRIMARY:
        block = run.metrics.get(track) or {}
        value = block.get(metric)
        if not isinstance(value, int | float):
            continue  # no items: no score
        low, high = (_get(block, f"ci.{metric}.{end}") for end in ("low", "high"))
        notes = f"{track} {metric} by rimo-eval (RIMO's grading), n = {block.get('n')}"
        if isinstance(low, int | float) and isinstance(high, int | float):
            notes += (f", {confidence(run):.0%} interval ["
                      f"{percent(low)}, {percent(high)}]")
        if k[track] > 1:
            notes += f", sample 0 of k = {k[track]}"
        entry: dict[str, Any] = {"dataset": {"id": dataset_id, "task_id": task},
                                 "value": percent(value)}
        if date:
            entry["date"] = date
        entry["source"] = {"url": url or source_url(run), "name": "rimo-eval"}
        entry["notes"] = notes
        out.append(entry)
    return out


def write_hf(run: ExportRun, out: Path, dataset_id: str, url: str | None) -> Path:
    (out / FILE.parent).mkdir(parents=True)
    text = yaml.safe_dump(entries(run, dataset_id, url), sort_keys=False, allow_unicode=True)
    (out / FILE).write_text(text, encoding="utf-8")
    return FILE


__all__ = ["FILE", "PRIMARY", "entries", "write_hf"]
