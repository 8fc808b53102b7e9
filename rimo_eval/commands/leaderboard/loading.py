"""The runs of a leaderboard: resolved and read through rimo_eval.commands.runs, one ``Run`` each.

Each run's files are read through DVC at its revision (``RunFiles``), so experiments, branches
and the workspace need no checkout. ``metrics`` is the run's metrics.json exactly as stored:
every point value the leaderboard shows is taken from it, never recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rimo_eval.artifacts.paths import (
    BREAKDOWN_PATH,
    JUDGE_METRICS_PATH,
    METRICS_PATH,
    PROVENANCE_PATH,
    scores_path,
)
from rimo_eval.commands.leaderboard.arguments import LABELS
from rimo_eval.commands.runs import (
    WORKSPACE,
    Revision,
    RunAt,
    baseline_experiments,
    commit_date,
    open_run,
    resolve,
)
from rimo_eval.core.model_name import model_name
from rimo_eval.errors import ConfigError, DataError, StageError
from rimo_eval.judge.metrics import judge_block
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.samples import with_sample

# Only what the statistics and figures read: the list-valued ``matched`` column stays on disk.
SCORE_COLUMNS = {
    TRACK_N: ["problem_id", "sample", "domain", "item_hash", "status", "gold", "prediction",
              "correct"],
    TRACK_P: ["problem_id", "sample", "item_hash", "number_of_parts", "gradable", "status",
              "n_matched", "strict", "prefix_score"],
}


@dataclass
class Run(RunAt):
    """One ranked run; ``metrics`` is its reports/metrics.json as stored."""

    breakdown: dict[str, Any]
    provenance: dict[str, Any]
    scores: dict[str, pd.DataFrame]
    params: dict[str, Any]  # params.yaml at the revision ({} when it has none)
    judge: Mapping[str, Any] | None = None  # RIMO-P.judge block of judge.json, where it ran
    date: str | None = None
    label: str = field(default="")

    @property
    def backend(self) -> str:
        names = {str((self.provenance.get("predictions") or {}).get(t, {}).get("backend"))
                 for t in TRACKS}
        names.discard("None")
        if not names:
            names = {str((self.params.get("predict") or {}).get("backend", "?"))}
        return "+".join(sorted(names))

    @property
    def model(self) -> str:
        """The model as a user would name it: the served model, the replay file, the GGUF."""
        predict = self.params.get("predict") or {}
        return model_name(self.backend, predict.get(self.backend) or {})

    @property
    def k(self) -> int:
        return max(int(self.metrics.get(t, {}).get("k", 1)) for t in TRACKS)

    @property
    def commit(self) -> str:
        """The revision's own commit; for the workspace the commit it was run at."""
        if self.revision.rev:
            return self.revision.rev[:12]
        git = self.provenance.get("git") or {}
        sha = str(git.get("commit") or "-")[:12]
        return f"{sha}+dirty" if git.get("dirty") else sha


def targets(root: Path, names: list[str], every: bool) -> list[Revision]:
    """The RUN arguments, or with ``--all`` every experiment of the baseline and the
    workspace; each revision once, in the order given."""
    if every and names:
        raise ConfigError("give RUN names or --all, not both")
    if not every and not names:
        raise ConfigError("name the runs to rank (experiments, revisions, "
                          "'workspace') or pass --all")
    found = [resolve(root, WORKSPACE), *baseline_experiments(root)] if every else [
        resolve(root, n) for n in names]
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


def load_run(root: Path, revision: Revision) -> Run:
    # Name every absent table and its `dvc pull` / `dvc exp pull` before reading any.
    with open_run(root, revision, [scores_path(t) for t in TRACKS]) as files:
        metrics = files.read_json(METRICS_PATH) or {}
        breakdown = files.read_json(BREAKDOWN_PATH, False) or {}
        provenance = files.read_json(PROVENANCE_PATH, False) or {}
        scores = {t: with_sample(files.read_parquet(scores_path(t), SCORE_COLUMNS[t]))
                  for t in TRACKS}
        judge = files.read_json(JUDGE_METRICS_PATH, False) or {}
        params = files.read_params()
    for t in TRACKS:
        if not isinstance(metrics.get(t), dict):
            raise DataError(f"reports/metrics.json at {revision.label}: no {t} block")
    return Run(revision, metrics, breakdown, provenance, scores, params, judge_block(judge),
               commit_date(root, revision))


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


def load_runs(root: Path, names: list[str], every: bool = False, label: str = "exp"
              ) -> list[Run]:
    runs = [load_run(root, r) for r in targets(root, names, every)]
    assign_labels(runs, label)
    return runs


def load_every(root: Path, label: str = "exp") -> tuple[list[Run], list[LeftOut]]:
    """``--all``: the workspace and every experiment of its baseline that can be read; one
    that cannot (its tables not in the local cache, no metrics) is left out with the reason,
    as an incomparable one is, instead of stopping the whole board."""
    runs, left = [], []
    for revision in targets(root, [], every=True):
        try:
            runs.append(load_run(root, revision))
        except StageError as exc:
            left.append(LeftOut(revision.label, revision.to_json(), f"not readable: {exc}"))
    assign_labels(runs, label)
    return runs, left


__all__ = ["SCORE_COLUMNS", "LeftOut", "Run", "assign_labels", "load_every", "load_run",
           "load_runs", "targets"]
