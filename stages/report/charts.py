"""The report's charts as matplotlib Figures, and their byte-stable PNG encoding.

The functions return the Figure so a reader of the notebook can restyle or extend it; the
notebook shows it through :func:`png`, whose bytes depend only on the pixels.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from stages.core.tracks import TRACK_N, TRACK_P
from stages.report.tables import sorted_parts

DOMAIN_COLOUR = "#4878a8"
PARTS_SERIES = (("strict", "#4878a8"), ("sub_problem_accuracy", "#e0823d"),
                ("prefix_score", "#6aa84f"))


def png(fig: Figure) -> bytes:
    import matplotlib.style

    buf = io.BytesIO()
    with matplotlib.style.context("default"):  # savefig.* rc settings apply at save time
        # No "Software" tag: the PNG then depends only on the pixels, not matplotlib's version.
        fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _figure(title: str, top: float = 1.12) -> tuple[Figure, Axes]:
    # A bare Figure (not pyplot): not registered with the inline backend, so not shown twice.
    fig = Figure(figsize=(8, 3.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_ylim(0, top)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("rate")
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:.0%}")
    return fig, ax


def domain_chart(metrics: Mapping[str, Any]) -> Figure:
    """RIMO-N accuracy per domain, each bar labelled with its rate and item count."""
    import matplotlib.style

    n = metrics.get(TRACK_N) or {}
    acc, counts = n.get("by_domain") or {}, n.get("by_domain_n") or {}
    domains = sorted(acc)
    with matplotlib.style.context("default"):  # ignore any local matplotlibrc
        fig, ax = _figure(f"{TRACK_N}: accuracy by domain")
        if domains:
            values = [float(acc[d] or 0.0) for d in domains]
            bars = ax.bar(domains, values, color=DOMAIN_COLOUR)
            ax.bar_label(bars, labels=[f"{v:.0%} (n={counts.get(d, '?')})"
                                       for d, v in zip(domains, values, strict=True)])
        else:
            ax.text(0.5, 0.5, "no items", ha="center", transform=ax.transAxes)
    return fig


def parts_chart(metrics: Mapping[str, Any]) -> Figure:
    """RIMO-P strict / sub-problem accuracy / prefix score per number of parts."""
    import matplotlib.style

    parts = sorted_parts((metrics.get(TRACK_P) or {}).get("by_parts") or {})
    with matplotlib.style.context("default"):
        fig, ax = _figure(f"{TRACK_P}: by number of parts", top=1.25)  # room for the legend
        if parts:
            width = 0.8 / len(PARTS_SERIES)
            for i, (name, colour) in enumerate(PARTS_SERIES):
                xs = [j + (i - 1) * width for j in range(len(parts))]
                ax.bar(xs, [float(v.get(name) or 0.0) for _k, v in parts], width,
                       label=name.replace("sub_problem", "sub-problem").replace("_", " "),
                       color=colour)
            ax.set_xticks(range(len(parts)),
                          [f"{k} part(s)\nn={v.get('n', '?')}" for k, v in parts])
            ax.legend(loc="upper center", ncols=3, fontsize="small")
        else:
            ax.text(0.5, 0.5, "no items", ha="center", transform=ax.transAxes)
    return fig
