"""The comparison's chart: each rate metric's paired difference B - A with its interval, as a
PNG data URI for the HTML page (an image: nothing in it can run, nothing is fetched)."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure


def delta_rows(metrics: Sequence[Mapping[str, Any]]) -> list[tuple[str, float, float, float]]:
    """(name, delta, low, high) of every rate row that has a paired interval."""
    rows = []
    for r in metrics:
        ci, delta = r.get("ci"), r.get("delta")
        if r.get("rate") and ci and delta is not None and ci.get("low") is not None:
            rows.append((str(r["name"]), float(delta), float(ci["low"]), float(ci["high"])))
    return rows


def delta_chart(metrics: Sequence[Mapping[str, Any]], level: str) -> Figure | None:
    rows = delta_rows(metrics)
    if not rows:
        return None
    fig = Figure(figsize=(7.5, 0.6 + 0.28 * len(rows)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]  # the table's order, top to bottom
    for y, (_, d, low, high) in zip(ys, rows, strict=True):
        colour = "#b00" if high < 0 else "#070" if low > 0 else "#555"
        ax.plot([low, high], [y, y], color=colour, linewidth=2)
        ax.plot([d], [y], "o", color=colour, markersize=4)
    ax.axvline(0, color="#999", linewidth=1)
    ax.set_yticks(ys, [name for name, *_ in rows], fontsize=8)
    ax.set_xlabel(f"B - A, with the {level} paired-bootstrap interval")
    ax.grid(axis="x", color="#eee")
    return fig


def data_uri(fig: Figure) -> str:
    import matplotlib.style

    buf = io.BytesIO()
    with matplotlib.style.context("default"):
        # No "Software" tag: the bytes depend only on the pixels (same runs, same page).
        fig.savefig(buf, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


__all__ = ["data_uri", "delta_chart", "delta_rows"]
