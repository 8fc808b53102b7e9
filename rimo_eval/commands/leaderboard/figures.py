"""The leaderboard's figures at one-column paper width, PNG and SVG, byte-identical on rebuild.

matplotlib's object API on the Agg canvas (no pyplot, no global state); the SVG hash salt and
the metadata are fixed, so equal runs give equal bytes. Labels are untrusted text: ``$`` is
escaped so mathtext never parses a model name, and long names are cut.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rimo_eval.artifacts.items import DOMAINS
from rimo_eval.commands.leaderboard.labels import label
from rimo_eval.commands.leaderboard.loading import Run
from rimo_eval.commands.leaderboard.ranking import find_metric, item_table, rank
from rimo_eval.commands.leaderboard.years import year_heatmap
from rimo_eval.rimo.tracks import HEADLINE, TRACK_N, TRACK_P, TRACKS

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

WIDTH = 3.4  # inches: one column of a two-column paper
RC: dict[RcKeyType, Any] = {
    "svg.hashsalt": "rimo-eval-leaderboard", "svg.fonttype": "path", "font.size": 7,
    "font.family": "DejaVu Sans", "axes.titlesize": 7, "axes.labelsize": 7,
    "xtick.labelsize": 6, "ytick.labelsize": 6, "path.simplify": False}
NAMES = {"accuracy": "accuracy", "strict": "strict", "sub_problem_accuracy": "sub-problem acc.",
         "prefix_score": "prefix score"}
LEADER, OTHER, BELOW = "#1f4e9c", "#5a5a5a", "#b03030"


def encode(fig: Figure) -> dict[str, bytes]:
    """PNG (300 dpi) and SVG bytes; no date, no software stamp."""
    FigureCanvasAgg(fig)
    out = {}
    for fmt, meta in (("png", {"Software": None}), ("svg", {"Date": None, "Creator": None})):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=300, metadata=meta)
        out[fmt] = buf.getvalue()
    return out


def _colour(row: Mapping[str, Any]) -> str:
    """Blue: the leader of the ranked metric; red: significantly below it."""
    test = row.get("vs_leader")
    return LEADER if test is None else BELOW if test["below_leader"] else OTHER


def panel_colours(board: Mapping[str, Any], runs: Sequence[Run] | None, name: str
                  ) -> dict[str, str]:
    """label -> colour on the panel of metric ``name``: blue its leader, red the runs
    significantly below it. The ranked metric's are the table's own tests; any other metric
    is tested the same way (ranking.rank: same draw, same test, Holm over its runs)."""
    if name == board["ranked_by"]:
        return {r["label"]: _colour(r) for r in board["runs"]}
    if not runs:
        return {r["label"]: OTHER for r in board["runs"]}
    boot = board["bootstrap"]
    ranked = rank(runs, find_metric(name, board["k"]), int(boot["samples"]), int(boot["seed"]),
                  float(boot["confidence"]))
    out = {r.label: OTHER for r in runs}
    out[runs[ranked["leader"]].label] = LEADER
    for i, test in ranked["tests"].items():
        if test["below_leader"]:
            out[runs[i].label] = BELOW
    return out


def panel_title(track: str, metric: str, k: int, panels: int, ranked: bool) -> str:
    """The metric's name on its own line, "mean@k" and "(ranked)" on the next: three panels
    share one column's width, and on one line their titles ran into each other (issue 43)."""
    short = NAMES[metric.removeprefix("mean_at_k.")]
    first = f"{track} {short}" if panels == 1 else short
    second = " ".join(w for w, on in (("mean@k", k > 1), ("(ranked)", ranked)) if on)
    return f"{first}\n{second}" if second else first


def forest(board: Mapping[str, Any], track: str, runs: Sequence[Run] | None = None) -> Figure:
    """Each headline metric of ``track`` (mean@k at k > 1) with its interval, runs in rank
    order, leader on top; on each panel the leader of that panel's metric is blue and the runs
    significantly below it red (``runs`` gives the per-item scores the tests need; without
    them only the ranked metric's panel is marked)."""
    rows = board["runs"]
    metrics = [(m if board["k"] == 1 else f"mean_at_k.{m}") for m in HEADLINE[track]]
    fig = Figure(figsize=(WIDTH, 0.45 + 0.17 * len(rows)), layout="constrained")
    axes = fig.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
    y = np.arange(len(rows))[::-1]
    for ax, m in zip(axes, metrics, strict=True):
        name = f"{track}.{m}"
        colours = panel_colours(board, runs, name)
        for yi, row in zip(y, rows, strict=True):
            v, lo, hi = row.get(name), row.get(f"{name}_ci_low"), row.get(f"{name}_ci_high")
            if v is None:
                continue
            err = None if lo is None or hi is None else [[v - lo], [hi - v]]
            ax.errorbar([v], [yi], xerr=err, fmt="o", ms=2.5, lw=0.8, capsize=1.5,
                        color=colours[row["label"]])
        ax.set_title(panel_title(track, m, board["k"], len(metrics),
                                 name == board["ranked_by"]))
        ax.set_xlim(-0.02, 1.02)
        ax.set_xticks([0, 0.5, 1])
        ax.grid(axis="x", lw=0.3, color="#dddddd")
    axes[0].set_yticks(y, [label(r["label"]) for r in rows])
    axes[0].set_ylim(-0.7, len(rows) - 0.3)
    if len(metrics) > 1:
        fig.suptitle(track, fontsize=7)
    return fig


def _total_cost(row: Mapping[str, Any]) -> float | None:
    values = [row.get(f"{t}.usage.cost_usd") for t in TRACKS]
    return None if all(v is None for v in values) else sum(float(v or 0) for v in values)


def accuracy_cost(board: Mapping[str, Any]) -> Figure | None:
    """RIMO-N accuracy (with its interval) against the run's cost; None when no run has one."""
    rows = [(r, c) for r in board["runs"] if (c := _total_cost(r)) is not None]
    if not rows:
        return None
    name = f"{TRACK_N}.accuracy" if board["k"] == 1 else f"{TRACK_N}.mean_at_k.accuracy"
    fig = Figure(figsize=(WIDTH, 2.4), layout="constrained")
    ax = fig.subplots()
    for row, c in rows:
        v, lo, hi = row.get(name), row.get(f"{name}_ci_low"), row.get(f"{name}_ci_high")
        err = None if lo is None or hi is None else [[v - lo], [hi - v]]
        ax.errorbar([c], [v], yerr=err, fmt="o", ms=3, lw=0.8, capsize=1.5, color=_colour(row))
        # Right of the point, below its centre, on a white box: readable over a neighbour's bar.
        ax.annotate(label(row["label"], 20), (c, v), xytext=(4, -3), textcoords="offset points",
                    fontsize=5.5, va="top", zorder=3,
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none",
                          "alpha": 0.8})
    costs = [c for _, c in rows]
    if min(costs) > 0 and max(costs) / min(costs) > 20:
        ax.set_xscale("log")
        ax.set_xlim(min(costs) / 1.5, max(costs) * 4)  # room for the last label
    else:
        ax.set_xlim(0, max(costs) * 1.35 or 1)
    ax.set_xlabel("cost (USD, both tracks)")
    ax.set_ylabel(f"{TRACK_N} {'accuracy' if board['k'] == 1 else 'mean@k accuracy'}")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(lw=0.3, color="#dddddd")
    return fig


def domain_heatmap(board: Mapping[str, Any], runs: Mapping[str, Run]) -> Figure:
    """RIMO-N accuracy by domain (each run's breakdown.json), runs x domains, rank order."""
    rows = board["runs"]
    values = np.full((len(rows), len(DOMAINS)), np.nan)
    for i, row in enumerate(rows):
        by_domain = (runs[row["label"]].breakdown.get(TRACK_N) or {}).get("by_domain") or {}
        for j, d in enumerate(DOMAINS):
            if isinstance(by_domain.get(d), int | float):
                values[i, j] = by_domain[d]
    fig = Figure(figsize=(WIDTH, 0.6 + 0.2 * len(rows)), layout="constrained")
    ax = fig.subplots()
    # In percent, as the cells are written, so the colour bar reads 0-100 like them.
    image = ax.imshow(100 * values, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    for (i, j), v in np.ndenumerate(values):
        if not np.isnan(v):
            ax.text(j, i, f"{100 * v:.1f}", ha="center", va="center", fontsize=5.5,
                    color="white" if v < 0.6 else "black")
    counts = (runs[rows[0]["label"]].breakdown.get(TRACK_N) or {}).get("by_domain_n") or {}
    ax.set_xticks(range(len(DOMAINS)), [f"{d}\n(n = {counts[d]})" if d in counts else d
                                        for d in DOMAINS])
    ax.set_yticks(range(len(rows)), [label(r["label"]) for r in rows])
    ax.tick_params(length=0)
    ax.set_title(f"{TRACK_N} accuracy by domain (%)")
    bar = fig.colorbar(image, ax=ax, shrink=0.9, pad=0.02, ticks=[0, 25, 50, 75, 100])
    bar.ax.tick_params(labelsize=5)
    bar.set_label("accuracy (%)", fontsize=5)
    return fig


def solved_grid(board: Mapping[str, Any], runs: Mapping[str, Run]) -> Figure:
    """RIMO-N items x runs: solved (at k > 1, the share of samples right), items sorted by how
    many runs solve them, most-solved first (ties by problem_id)."""
    rows = board["runs"]
    col = "correct" if board["k"] == 1 else "mean_correct"
    tables = [item_table(runs[r["label"]], TRACK_N) for r in rows]
    grid = np.column_stack([t[col].to_numpy(dtype=float) for t in tables]).T  # runs x items
    ids = tables[0]["problem_id"].tolist()
    order = sorted(range(len(ids)), key=lambda j: (-grid[:, j].sum(), ids[j]))
    grid = grid[:, order]
    fig = Figure(figsize=(WIDTH, 0.55 + 0.16 * len(rows)), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto",
                      interpolation="nearest")
    ax.set_yticks(range(len(rows)), [label(r["label"]) for r in rows])
    ax.set_xlabel(f"{TRACK_N} items ({len(ids)}), sorted by how many runs solve them")
    ax.set_xticks([])
    # The colour key: with none, a reader had to guess which shade meant right (issue 43).
    if board["k"] == 1:
        ax.set_title(f"{TRACK_N} solved items")
        bar = fig.colorbar(image, ax=ax, shrink=0.9, pad=0.02, ticks=[0, 1])
        bar.ax.set_yticklabels(["wrong", "right"])
    else:
        ax.set_title(f"{TRACK_N} share of the k = {board['k']} samples right per item")
        bar = fig.colorbar(image, ax=ax, shrink=0.9, pad=0.02, ticks=[0, 0.5, 1])
        bar.ax.set_yticklabels(["0", "1/2", "all"])
        bar.set_label("samples right", fontsize=5)
    bar.ax.tick_params(labelsize=5)
    return fig


def figures(board: Mapping[str, Any], runs: Sequence[Run]) -> dict[str, dict[str, bytes]]:
    """name -> {"png": bytes, "svg": bytes}; accuracy-vs-cost only where costs are known."""
    by_label = {r.label: r for r in runs}
    makers: dict[str, Callable[[], Figure | None]] = {
        "forest_rimo_n": lambda: forest(board, TRACK_N, runs),
        "forest_rimo_p": lambda: forest(board, TRACK_P, runs),
        "accuracy_cost": lambda: accuracy_cost(board),
        "domain_heatmap": lambda: domain_heatmap(board, by_label),
        "solved_grid": lambda: solved_grid(board, by_label),
        "year_heatmap": lambda: year_heatmap(board, by_label, WIDTH),
    }
    out = {}
    with matplotlib.rc_context(RC):
        for name, make in makers.items():
            fig = make()
            if fig is not None:
                out[name] = encode(fig)
    return out


__all__ = ["WIDTH", "accuracy_cost", "domain_heatmap", "encode", "figures", "forest", "label",
           "panel_title", "solved_grid"]
