"""A run's name, resolved: the workspace, a git revision (branch, tag, sha) or a DVC experiment.
Light (no DVC import): the tools' argument parsers name ``WORKSPACE``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WORKSPACE = "workspace"  # the run in the working tree, as every tool names it


@dataclass(frozen=True)
class Revision:
    label: str  # as the user wrote it
    kind: str  # workspace | git | experiment (| queued experiment: view --partial)
    rev: str | None  # commit sha; None for the workspace
    ref: str | None = None  # refs/exps/... for an experiment

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind, "rev": self.rev, "ref": self.ref}

    @property
    def where(self) -> str:
        """How messages name it: the label, with the commit for a revision."""
        return self.label if self.rev is None else f"{self.label} ({self.rev[:12]})"


__all__ = ["WORKSPACE", "Revision"]
