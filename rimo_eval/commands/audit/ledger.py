"""Audit findings: one ``Check`` per verified (or broken) link, collected in a ``Ledger``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["ok", "break", "warning"]
# A value absent from a mapping (distinct from a recorded null).
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "(absent)"})()

# Every check the audit makes, by name; each can fail (tests/e2e/test_audit_checks.py breaks
# each one).
CHECKS = {
    "lock.present": "dvc.lock exists and has a stage producing the metrics file",
    "lock.md5": "every dep and out of the upstream stages matches dvc.lock (DVC's hashes)",
    "lock.params": "the params dvc.lock recorded are the params files' values now",
    "upstream.sha256": "the fetched files match the sha256 pinned in params fetch.sha256",
    "items.content_hash": "every item row recomputes to its own content_hash",
    "predictions.one_run": "one predictions file holds one backend and one fingerprint",
    "predictions.backend": "the predictions' backend is the one dvc.lock records",
    "predictions.fingerprint": "the configured backend fingerprints to the predictions' one",
    "predictions.items": "the predictions fit the items (ids, item hashes, statuses)",
    "scores.recompute": "the scores file equals a fresh grading of predictions and items",
    "metrics.recompute": "every value in metrics.json and breakdown.json recomputes from the "
                         "scores",
    "plots.recompute": "the plot tables recompute from the metrics",
    "judge.recompute": "the opt-in judge's metrics (reports/judge.json) recompute from its table",
    "provenance.pointer": "metrics.json names provenance.json and its sha256",
    "provenance.block": "provenance.json is there and is a provenance block",
    "provenance.sha256": "the files the block lists have the sha256 it records",
    "provenance.predictions": "the block names the predictions' backend and fingerprint",
    "provenance.upstream": "the block's upstream pin is params fetch's pin now",
    "provenance.params": "the block's score params are params score's now",
    "provenance.params_fingerprint": "the block's params fingerprint matches what it lists",
}


@dataclass(frozen=True)
class Check:
    """One verified (or failed) link. ``check`` names it (see CHECKS); ``path`` is the artifact
    to name when it breaks; ``stage`` is set for a stage's code and params, which every
    artifact of that stage depends on."""

    status: Status
    check: str
    path: str
    message: str
    stage: str | None = None

    @property
    def kind(self) -> str:
        return self.check.split(".", 1)[0]

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "check": self.check, "kind": self.kind,
                "path": self.path, "stage": self.stage, "message": self.message}


@dataclass
class Ledger:
    checks: list[Check] = field(default_factory=list)

    def add(self, status: Status, check: str, path: str, message: str,
            stage: str | None = None) -> None:
        if check not in CHECKS:
            raise ValueError(f"unknown audit check {check!r}")
        self.checks.append(Check(status, check, path, message, stage))

    def ok(self, check: str, path: str, message: str, stage: str | None = None) -> None:
        self.add("ok", check, path, message, stage)

    def broke(self, check: str, path: str, message: str, stage: str | None = None) -> None:
        self.add("break", check, path, message, stage)

    def warn(self, check: str, path: str, message: str, stage: str | None = None) -> None:
        self.add("warning", check, path, message, stage)

    def verdict(self, ok: bool, check: str, path: str, good: str, bad: str,
                stage: str | None = None) -> bool:
        """One check, either way: exactly one entry, an ok or a break."""
        (self.ok if ok else self.broke)(check, path, good if ok else bad, stage)
        return ok

    @property
    def breaks(self) -> list[Check]:
        return [c for c in self.checks if c.status == "break"]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status == "warning"]


def shown(value: Any) -> str:
    return "(absent)" if value is MISSING else repr(value)


def ids(values: list[str], limit: int = 10) -> str:
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ", ".join(values[:limit]) + more


__all__ = ["CHECKS", "MISSING", "Check", "Ledger", "Status", "ids", "shown"]
