"""The audit's report: each metric with its chain of links, as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rimo_eval.artifacts.paths import PROVENANCE_PATH
from rimo_eval.commands.audit.ledger import Ledger, shown
from rimo_eval.commands.audit.recompute import MetricResult
from rimo_eval.rimo.tracks import HEADLINE, TRACKS


@dataclass
class Link:
    kind: str  # scores | predictions | items | upstream
    path: str
    sha256: str | None
    detail: str
    paths: tuple[str, ...]  # every path whose breaks belong to this link
    stage: str | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "sha256": self.sha256,
                "detail": self.detail, "stage": self.stage, "ok": self.ok,
                "problems": self.problems}


@dataclass
class AuditReport:
    metrics_path: str
    metrics: list[MetricResult]
    chains: dict[str, list[Link]]
    ledger: Ledger
    provenance: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return not self.ledger.breaks

    def by_check(self) -> dict[str, dict[str, int]]:
        """How many times each check passed, broke or warned: what the audit looked at."""
        out: dict[str, dict[str, int]] = {}
        for c in self.ledger.checks:
            counts = out.setdefault(c.check, {"ok": 0, "break": 0, "warning": 0})
            counts[c.status] += 1
        return dict(sorted(out.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "metrics_file": self.metrics_path,
            "checks": len(self.ledger.checks),
            "by_check": self.by_check(),
            "breaks": [c.to_json() for c in self.ledger.breaks],
            "warnings": [c.to_json() for c in self.ledger.warnings],
            "chains": {t: [link.to_json() for link in links] for t, links in self.chains.items()},
            "metrics": [m.to_json() for m in self.metrics],
            "provenance": {k: (self.provenance or {}).get(k)
                           for k in ("git", "params_fingerprint", "packages")},
        }

    def split_by_file(self) -> tuple[list[MetricResult], list[MetricResult]]:
        """(the values of metrics.json, those of the other files: the breakdowns)."""
        own = [m for m in self.metrics if m.file in ("", self.metrics_path)]
        return own, [m for m in self.metrics if m not in own]

    def render(self) -> str:
        breaks = self.ledger.breaks
        own, others = self.split_by_file()
        files = sorted({m.file for m in others})
        also = (f" and {len(others)} breakdown values in {', '.join(files)}" if others else "")
        head = (f"audit: OK: {len(own)} metrics in {self.metrics_path}{also} recompute and "
                f"every hash chain holds ({len(self.ledger.checks)} checks)" if self.ok else
                f"audit: FAILED: {len(breaks)} break(s) in the chains of {self.metrics_path}")
        lines = [head, ""]
        by_name = {m.name: m for m in own}
        for track in TRACKS:
            for key in HEADLINE[track]:
                m = by_name.get(f"{track}.{key}")
                if m is not None:
                    lines += self._render_chain(m)
            rest = [m for m in own if m.tracks == (track,)
                    and m.name.split(".", 1)[1] not in HEADLINE[track]]
            parts = [m for m in others if m.tracks == (track,)]
            lines.append(f"{track}: {sum(m.recomputes for m in rest)}/{len(rest)} more "
                         f"metrics and {sum(m.recomputes for m in parts)}/{len(parts)} "
                         f"breakdown values recompute"
                         + "".join(f"\n  BROKEN {m.name} = {m.value!r} (recomputes to "
                                   f"{shown(m.recomputed)})" for m in rest + parts
                                   if not m.recomputes))
            lines.append("")
        shared = [m for m in own if m.tracks == TRACKS]
        if shared:
            lines.append(f"{' + '.join(TRACKS)}: {sum(m.recomputes for m in shared)}/"
                         f"{len(shared)} sample counts recompute"
                         + "".join(f"\n  BROKEN {m.name} = {m.value!r}" for m in shared
                                   if not m.recomputes))
        prov = self.provenance or {}
        git = prov.get("git") or {}
        if prov:
            lines.append(f"{PROVENANCE_PATH.as_posix()}: commit {git.get('commit')}"
                         f"{' (sources dirty)' if git.get('dirty') else ''}, params fingerprint "
                         f"{str(prov.get('params_fingerprint'))[:12]}, packages "
                         + ", ".join(f"{k} {v}" for k, v in (prov.get("packages") or {}).items()))
        if breaks:
            lines += ["", "breaks:"] + [f"  {i}. {c.message}" for i, c in enumerate(breaks, 1)]
        if self.ledger.warnings:
            lines += ["", "warnings:"] + [f"  - {c.message}" for c in self.ledger.warnings]
        return "\n".join(lines).rstrip() + "\n"

    def _render_chain(self, m: MetricResult) -> list[str]:
        status = ("ok" if m.ok else "recomputes, but its chain is BROKEN" if m.recomputes
                  else f"BROKEN: recomputes to {shown(m.recomputed)}")
        lines = [f"{m.name} = {m.value!r}  [{status}]"]
        links = self.chains.get(m.tracks[0], [])
        width = max((len(link.path) for link in links), default=0)
        for link in links:
            sha = f"sha256 {link.sha256[:12]}" if link.sha256 else ""
            mark = "ok" if link.ok else f"BROKEN: {len(link.problems)} break(s) below"
            text = "  ".join(x for x in (sha, link.detail) if x)
            lines.append(f"  <- {link.kind:<11} {link.path:<{width}}  {text}  [{mark}]")
        return lines


__all__ = ["AuditReport", "Link"]
