"""A run's header in the site: its name, model and k, and its headline metrics with their
intervals, read from the run's metrics.json."""

from __future__ import annotations

from typing import Any

from rimo_eval.artifacts.metrics_files import interval
from rimo_eval.commands.view.load import Run
from rimo_eval.commands.view.payload import FLAGS, _text
from rimo_eval.rimo.tracks import HEADLINE, TRACK_N, TRACK_P, TRACKS, metric_words


def _interval(block: dict[str, Any], metric: str) -> list[Any] | None:
    low, high = interval(block, metric)  # old runs' RIMO-N accuracy keys too
    return None if low is None or high is None else [low, high]


def header(run: Run, cutoff: str | None = None) -> dict[str, Any]:
    """Headline metrics with their intervals, read from the run's metrics.json; ``cutoff``:
    the run's training cutoff, where known. ``model`` is the run record's (what
    reports/model.json and every other tool show: backend and model in one string)."""
    tracks = {}
    for track in TRACKS:
        block = run.metrics.get(track) or {}
        # "name": the metric in words, as every screen says it; "key": metrics.json's.
        rows = [{"name": metric_words(m), "key": m, "value": block.get(m),
                 "ci": _interval(block, m)} for m in HEADLINE[track]]
        inner = block.get("mean_at_k") or {}
        rows += [{"name": metric_words(f"mean_at_k.{m}"), "key": f"mean_at_k.{m}",
                  "value": inner[m], "ci": _interval(inner, m)}
                 for m in HEADLINE[track] if m in inner]
        rows += [{"name": metric_words(m), "key": m, "value": block[m],
                  "ci": _interval(block, m)} for m in ("pass_at_k", "maj_at_k") if m in block]
        diag = block.get("diagnostics") or {}
        if "lenient_accuracy" in diag:
            rows.append({"name": "lenient accuracy (diagnostic)",
                         "key": "diagnostics.lenient_accuracy",
                         "value": diag["lenient_accuracy"], "ci": None})
        flag_counts = {f: diag[f] for f in FLAGS if isinstance(diag.get(f), int | float)}
        counts = {c: block[c] for c in ("n", "correct", "missing", "errors", "ungradable")
                  if isinstance(block.get(c), int | float)}
        tracks[track] = {"metrics": rows, "counts": counts, "diagnostics": flag_counts}
    preds = run.predictions[TRACK_N] if len(run.predictions[TRACK_N]) else \
        run.predictions[TRACK_P]
    backend = _text(preds["backend"].iloc[0]) if len(preds) else ""
    sample = run.metrics.get("sample") or {}
    return {"label": run.label, "kind": run.revision.kind, "rev": run.revision.rev,
            "backend": backend, "model": run.model, "k": run.k,
            "is_sample": bool(sample.get("is_sample")), "tracks": tracks, "cutoff": cutoff}


__all__ = ["header"]
