"""The runs of a leaderboard, one ``Run`` each, opened by the one run reader (rimo_eval.run).

Experiments, branches and the workspace need no checkout, and one DVC repository handle
serves the whole board. ``metrics`` is the run's metrics.json exactly as stored: every point
value the leaderboard shows is taken from it, never recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rimo_eval.artifacts.paths import scores_path
from rimo_eval.commands.leaderboard.arguments import LABELS
from rimo_eval.errors import ConfigError, DataError, StageError
from rimo_eval.judge.metrics import judge_block
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.run.reader import RunReader
from rimo_eval.run.record import Run as Record
from rimo_eval.run.revision import WORKSPACE, Revision
from rimo_eval.score.samples import with_sample

# Only what the statistics and figures read: the list-valued ``matched`` column stays on disk.
SCORE_COLUMNS = {
    TRACK_N: ["problem_id", "sample", "domain", "item_hash", "status", "gold", "prediction",
              "correct"],
    TRACK_P: ["problem_id", "sample", "item_hash", "number_of_parts", "gradable", "status",
              "n_matched", "strict", "prefix_score"],
}


@dataclass
class Run:
    """One ranked run: the run record's facts (``metrics`` is its metrics.json as stored,
    ``model`` and ``k`` as every tool shows them) and the score columns the board reads."""

    revision: Revision
    metrics: Mapping[str, Any]
    breakdown: Mapping[str, Any]
    provenance: Mapping[str, Any]
    scores: dict[str, pd.DataFrame]
    params: Mapping[str, Any]  # params.yaml at the revision ({} when it has none)
    judge: Mapping[str, Any] | None = None  # RIMO-P.judge block of judge.json, where it ran
    date: str | None = None
    label: str = field(default="")
    model: str = ""
    k: int = 1
    content: str = ""  # the record's digest: the same run under two names
    # (problem_id, item_hash) of sample 0 per track, made once (comparable.py asks it often).
    item_sets: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict, repr=False,
                                                             compare=False)

    @property
    def backend(self) -> str:
        names = {str((self.provenance.get("predictions") or {}).get(t, {}).get("backend"))
                 for t in TRACKS}
        names.discard("None")
        if not names:
            names = {str((self.params.get("predict") or {}).get("backend", "?"))}
        return "+".join(sorted(names))

    @property
    def commit(self) -> str:
        """The revision's own commit; for the workspace the commit it was run at."""
        if self.revision.rev:
            return self.revision.rev[:12]
        git = self.provenance.get("git") or {}
        sha = str(git.get("commit") or "-")[:12]
        return f"{sha}+dirty" if git.get("dirty") else sha


def targets(reader: RunReader, names: list[str], every: bool) -> list[Revision]:
    """The RUN arguments, or with ``--all`` every experiment of the baseline and the
    workspace; each revision once, in the order given."""
    if every and names:
        raise ConfigError("give RUN names or --all, not both")
    if not every and not names:
        raise ConfigError("name the runs to rank (experiments, revisions, "
                          "'workspace') or pass --all")
    found = ([reader.resolve(WORKSPACE), *reader.experiments()] if every else
             [reader.resolve(n) for n in names])
    seen: set[str] = set()
    out = []
    for r in found:
        if r.label in seen:
            raise ConfigError(f"{r.label} is named twice")
        seen.add(r.label)
        out.append(r)
    if len(out) < 2:
        raise ConfigError(f"{len(out)} run found; a leaderboard needs at least "
                          f"two (run experiments with `dvc exp run`, see `dvc exp show`)")
    return out


def from_record(record: Record, date: str | None = None) -> Run:
    """The board's run: the record's facts and its score columns."""
    for t in TRACKS:
        if not isinstance(record.metrics.get(t), dict):
            raise DataError(f"reports/metrics.json at {record.label}: no {t} block")
    scores = {t: with_sample(record.scores(t, SCORE_COLUMNS[t])) for t in TRACKS}
    return Run(record.revision, record.metrics, record.breakdown, record.provenance, scores,
               record.params, judge_block(record.judge), date, model=record.model,
               k=record.k, content=record.content)


def load_run(reader: RunReader, revision: Revision) -> Run:
    # Name every absent table and what brings it back before reading any.
    record = reader.open(revision, [scores_path(t) for t in TRACKS])
    return from_record(record, reader.commit_date(revision))


def assign_labels(runs: list[Run], how: str) -> None:
    """``exp``: the name as given (experiment, branch, workspace); ``model``: the model, with
    the run's name added where two runs share a model."""
    if how not in LABELS:
        raise ConfigError(f"--label must be exp or model, got {how!r}")
    for run in runs:
        run.label = run.revision.label if how == "exp" else run.model
    if how == "model":
        labels = [r.label for r in runs]
        for run in runs:
            if labels.count(run.label) > 1:
                run.label = f"{run.label} ({run.revision.label})"


@dataclass(frozen=True)
class LeftOut:
    """A run ``--all`` found but did not rank, and why."""

    label: str
    revision: dict[str, Any]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "revision": self.revision, "reason": self.reason}


def load_runs(reader: RunReader, names: list[str], every: bool = False, label: str = "exp"
              ) -> list[Run]:
    runs = [load_run(reader, r) for r in targets(reader, names, every)]
    assign_labels(runs, label)
    return runs


def load_every(reader: RunReader, label: str = "exp") -> tuple[list[Run], list[LeftOut]]:
    """``--all``: the workspace and every experiment of its baseline that can be read; one
    that cannot (its tables not in the local cache, no metrics) is left out with the reason,
    as an incomparable one is, instead of stopping the whole board. A run found under two
    names (the workspace after `dvc exp run` IS that experiment: the same metrics and
    provenance) is ranked once, under the experiment's name."""
    runs: list[Run] = []
    left: list[LeftOut] = []
    for revision in targets(reader, [], every=True):
        try:
            runs.append(load_run(reader, revision))
        except StageError as exc:
            left.append(LeftOut(revision.label, revision.to_json(), f"not readable: {exc}"))
    runs, twins = dedupe(runs)
    assign_labels(runs, label)
    return runs, twins + left


def dedupe(runs: list[Run]) -> tuple[list[Run], list[LeftOut]]:
    """Each run once: of two with the same content, the named one (an experiment, a branch)
    stays and the workspace is left out, naming its twin."""
    by_content: dict[str, Run] = {}
    for run in sorted(runs, key=lambda r: r.revision.kind == WORKSPACE):
        by_content.setdefault(run.content or run.revision.label, run)
    kept = [r for r in runs if by_content[r.content or r.revision.label] is r]
    left = [LeftOut(r.revision.label, r.revision.to_json(),
                    f"the same run as {by_content[r.content].revision.label} (same metrics "
                    f"and provenance): ranked once, under that name")
            for r in runs if by_content[r.content or r.revision.label] is not r]
    return kept, left


__all__ = ["SCORE_COLUMNS", "LeftOut", "Run", "assign_labels", "dedupe", "from_record",
           "load_every", "load_run", "load_runs", "targets"]
