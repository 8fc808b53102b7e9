"""The leaderboard's year lens (docs/accuracy_by_year.md): per run, each track's
year trend (copied from its breakdown.json) and, where the training cutoff is known, the unseen
subset. A cutoff comes from ``--cutoff RUN=DATE`` or else the run's own
``score.training_cutoff``; an override is computed from the run's scores with the score stage's
own function, so the numbers are the ones score would write. Descriptive, never a rank."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from rimo_eval.commands.leaderboard.labels import label
from rimo_eval.commands.leaderboard.loading import Run
from rimo_eval.params.cutoff import known_cutoff
from rimo_eval.rimo.tracks import TRACKS
from rimo_eval.rimo.years import BAND_LABELS, OUTCOME
from rimo_eval.run.params import own_cutoff
from rimo_eval.score.samples import first_sample
from rimo_eval.score.years import outcomes, unseen_block

TREND_KEYS = ("slope", "slope_ci_low", "slope_ci_high", "p_value", "samples", "reason")


def run_cutoff(run: Run, cutoffs: Mapping[str, str]) -> str | None:
    return known_cutoff((run.label, run.revision.label), own_cutoff(run.params), cutoffs)


def year_keys(run: Run, cutoffs: Mapping[str, str], confidence: float) -> dict[str, Any]:
    """``{track: {"trend": {...}, "unseen": {...} | None}}`` of one run."""
    cutoff = run_cutoff(run, cutoffs)
    out: dict[str, Any] = {"cutoff": cutoff}
    for track in TRACKS:
        lens = run.breakdown.get(track) or {}
        trend = lens.get("year_trend") or {}
        unseen = None
        if cutoff is not None:
            stored = lens.get("unseen") or {}
            if stored.get("cutoff") == cutoff:
                unseen = stored
            else:
                years, right = outcomes(first_sample(run.scores[track]), track)
                unseen = unseen_block(years, right, OUTCOME[track], cutoff, confidence)
        out[track] = {"trend": {k: trend.get(k) for k in TREND_KEYS} if trend else None,
                      "unseen": unseen}
    return out


def year_heatmap(board: Mapping[str, Any], runs: Mapping[str, Run], width: float) -> Figure:
    """Runs x year bands, one panel per track (RIMO-N accuracy, RIMO-P strict, in %), and an
    "unseen" column (items after the run's training cutoff) where a run's cutoff is known,
    "no cutoff" written where not."""
    rows = board["runs"]
    columns = [*BAND_LABELS[:-1], "unseen"]
    fig = Figure(figsize=(width, 0.8 + 0.2 * len(rows)), layout="constrained")
    axes = fig.subplots(1, len(TRACKS), sharey=True)
    for ax, track in zip(axes, TRACKS, strict=True):
        name = OUTCOME[track]
        values = np.full((len(rows), len(columns)), np.nan)
        for i, row in enumerate(rows):
            bands = (runs[row["label"]].breakdown.get(track) or {}).get("by_year_band") or {}
            for j, band in enumerate(columns[:-1]):
                if isinstance((bands.get(band) or {}).get(name), int | float):
                    values[i, j] = bands[band][name]
            unseen = ((row.get("years") or {}).get(track) or {}).get("unseen") or {}
            if isinstance((unseen.get("unseen") or {}).get(name), int | float):
                values[i, -1] = unseen["unseen"][name]
        image = ax.imshow(100 * values, cmap="viridis", vmin=0, vmax=100, aspect="auto")
        for (i, j), v in np.ndenumerate(values):
            if not np.isnan(v):
                ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=5,
                        color="white" if v < 0.6 else "black")
            elif j == len(columns) - 1:  # say why the cell is empty, never leave it blank
                ax.text(j, i, "no\ncutoff", ha="center", va="center", fontsize=3.5,
                        color="#777777")
        ax.set_xticks(range(len(columns)), [*columns[:-1], "unseen\n(> cutoff)"],
                      rotation=30, fontsize=5)
        ax.set_yticks(range(len(rows)), [label(row["label"]) for row in rows])
        ax.tick_params(length=0)
        ax.set_title(f"{track} {name} (%)", fontsize=6)
    # The shared words go once above both panels: in a one-column figure two full titles ran
    # into each other (tests/report/test_leaderboard_figures.py).
    fig.suptitle("By competition year", fontsize=6)
    fig.colorbar(image, ax=axes, shrink=0.9, pad=0.02, ticks=[0, 25, 50, 75, 100])
    return fig


__all__ = ["run_cutoff", "year_heatmap", "year_keys"]
