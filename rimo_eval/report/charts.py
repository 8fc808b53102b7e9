"""The report's charts as matplotlib Figures, and their byte-stable PNG encoding.

The functions return the Figure so a reader of the notebook can restyle or extend it; the
notebook shows it through :func:`png`, whose bytes depend only on the pixels. Every bar carries
its interval as an error bar, read from the metrics (``<metric>_ci_low`` / ``_ci_high`` flat
in a block, a ``ci`` entry, or ``by_domain_ci``); a bar without one is labelled "no interval".
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any, TypedDict

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from rimo_eval.report.tables import sorted_parts
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

Bounds = tuple[float, float] | None

DOMAIN_COLOUR = "#4878a8"
PARTS_SERIES = (("strict", "#4878a8"), ("sub_problem_accuracy", "#e0823d"),
                ("prefix_score", "#6aa84f"))
LENIENT_COLOUR = "#9b9b9b"  # a diagnostic, drawn apart from the benchmark's metrics
class ErrorBar(TypedDict):
    capsize: float
    ecolor: str
    error_kw: dict[str, float]


ERROR_BAR: ErrorBar = {"capsize": 4, "ecolor": "#222222", "error_kw": {"elinewidth": 1.2}}


def bounds(ci: Any) -> Bounds:
    """(low, high) of a ``{"low", "high"}`` interval, or None."""
    if isinstance(ci, Mapping) and ci.get("low") is not None and ci.get("high") is not None:
        return float(ci["low"]), float(ci["high"])
    return None


def flat_bounds(block: Mapping[str, Any], name: str) -> Bounds:
    """(low, high) from ``<name>_ci_low`` / ``<name>_ci_high`` in ``block``."""
    return bounds({"low": block.get(f"{name}_ci_low"), "high": block.get(f"{name}_ci_high")})


def _yerr(values: list[float], intervals: list[Bounds]) -> list[list[float]]:
    """matplotlib's asymmetric yerr; a bar without an interval gets none (NaN: not drawn)."""
    nan = float("nan")
    low = [max(v - b[0], 0.0) if b else nan for v, b in zip(values, intervals, strict=True)]
    high = [max(b[1] - v, 0.0) if b else nan for v, b in zip(values, intervals, strict=True)]
    return [low, high]


def _label(value: float, interval: Bounds, extra: str = "") -> str:
    ci = f"[{interval[0]:.0%}, {interval[1]:.0%}]" if interval else "no interval"
    return f"{value:.0%} {ci}{extra}"


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
    """RIMO-N accuracy per domain, each bar with its interval, rate and item count."""
    import matplotlib.style

    n = metrics.get(TRACK_N) or {}
    acc, counts = n.get("by_domain") or {}, n.get("by_domain_n") or {}
    cis = n.get("by_domain_ci") or {}
    domains = sorted(acc)
    with matplotlib.style.context("default"):  # ignore any local matplotlibrc
        fig, ax = _figure(f"{TRACK_N}: accuracy by domain (95% intervals)")
        if domains:
            values = [float(acc[d] or 0.0) for d in domains]
            found = [bounds(cis.get(d)) for d in domains]
            bars = ax.bar(domains, values, color=DOMAIN_COLOUR, yerr=_yerr(values, found),
                          **ERROR_BAR)
            ax.bar_label(bars, labels=[_label(v, b, f"\nn={counts.get(d, '?')}")
                                       for d, v, b in zip(domains, values, found, strict=True)],
                         padding=2, fontsize="small")
        else:
            ax.text(0.5, 0.5, "no items", ha="center", transform=ax.transAxes)
    return fig


def parts_chart(metrics: Mapping[str, Any]) -> Figure:
    """RIMO-P strict / sub-problem accuracy / prefix score per number of parts, with the
    intervals the metrics hold per group."""
    import matplotlib.style

    parts = sorted_parts((metrics.get(TRACK_P) or {}).get("by_parts") or {})
    with matplotlib.style.context("default"):
        fig, ax = _figure(f"{TRACK_P}: by number of parts (95% intervals where recorded)",
                          top=1.25)  # room for the legend
        if parts:
            width = 0.8 / len(PARTS_SERIES)
            for i, (name, colour) in enumerate(PARTS_SERIES):
                xs = [j + (i - 1) * width for j in range(len(parts))]
                values = [float(v.get(name) or 0.0) for _k, v in parts]
                found = [flat_bounds(v, name) for _k, v in parts]
                ax.bar(xs, values, width, yerr=_yerr(values, found), **ERROR_BAR,
                       label=name.replace("sub_problem", "sub-problem").replace("_", " "),
                       color=colour)
            ax.set_xticks(range(len(parts)),
                          [f"{k} part(s)\nn={v.get('n', '?')}" for k, v in parts])
            ax.legend(loc="upper center", ncols=3, fontsize="small")
        else:
            ax.text(0.5, 0.5, "no items", ha="center", transform=ax.transAxes)
    return fig


def headline_chart(metrics: Mapping[str, Any]) -> Figure:
    """The headline metrics with their intervals, and RIMO-N's lenient accuracy (a diagnostic,
    in grey) beside exact match."""
    import matplotlib.style

    n, p = metrics.get(TRACK_N) or {}, metrics.get(TRACK_P) or {}
    n_ci, p_ci = n.get("ci") or {}, p.get("ci") or {}
    bars: list[tuple[str, Any, Bounds, str]] = [
        (f"{TRACK_N}\naccuracy", n.get("accuracy"), bounds(n_ci.get("accuracy")),
         DOMAIN_COLOUR)]
    diag = n.get("diagnostics") or {}
    if "lenient_accuracy" in diag:
        bars.append((f"{TRACK_N} lenient\n(diagnostic)", diag.get("lenient_accuracy"),
                     bounds((n_ci.get("diagnostics") or {}).get("lenient_accuracy")),
                     LENIENT_COLOUR))
    for name, colour in PARTS_SERIES:
        label = name.replace("sub_problem", "sub-problem").replace("_", " ")
        bars.append((f"{TRACK_P}\n{label}", p.get(name), bounds(p_ci.get(name)), colour))
    with matplotlib.style.context("default"):
        fig, ax = _figure("Headline metrics (95% intervals)")
        values = [float(v or 0.0) for _l, v, _b, _c in bars]
        found = [b for _l, _v, b, _c in bars]
        drawn = ax.bar([b[0] for b in bars], values, color=[b[3] for b in bars],
                       yerr=_yerr(values, found), **ERROR_BAR)
        ax.bar_label(drawn, labels=[_label(v, b) for v, b in zip(values, found, strict=True)],
                     padding=2, fontsize="small")
        ax.tick_params(axis="x", labelsize="small")
    return fig
