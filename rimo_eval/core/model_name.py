"""The model of a run as a user names it: the served model, the replay file, the GGUF.

One rule for every place that shows it: the leaderboard's model column and ``--label model``,
and the score stage's ``reports/model.json`` (the ``model`` column of ``dvc exp show``, with the
backend in front).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PACKAGED_LOCAL = "gemma-3-270m (packaged)"


def model_name(backend: str, section: Mapping[str, Any] | None) -> str:
    """``section`` is the backend's params (``predict.<backend>``, or the ``backend_params``
    a predictions table records). A backend without a model of its own is named by itself."""
    s = section or {}
    value = {"replay": s.get("path"),
             "local": s.get("model_path") or PACKAGED_LOCAL,
             "constant": f"constant {s['answer']!r}" if "answer" in s else None,
             "oracle": None}.get(backend, s.get("model"))  # openai, anthropic, gemini, plugins
    return str(value) if value else backend


def run_label(backend: str, section: Mapping[str, Any] | None) -> str:
    """Backend and model in one short string (``replay runs/a.jsonl``, ``anthropic
    claude-x``, ``oracle``): the one column `dvc exp show` needs to tell runs apart."""
    name = model_name(backend, section)
    return name if name == backend or name.startswith(f"{backend} ") else f"{backend} {name}"


__all__ = ["PACKAGED_LOCAL", "model_name", "run_label"]
