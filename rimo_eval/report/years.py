"""The report's "Accuracy by competition year" section: bars per year band with Wilson
intervals (RIMO-N accuracy, RIMO-P strict) and one line each for the trend and the unseen
subset. Descriptive: later problems may also be harder, so a drop is evidence, not proof."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from rimo_eval.artifacts.numbers import pct
from rimo_eval.report.charts import (
    DOMAIN_COLOUR,
    ERROR_BAR,
    PARTS_SERIES,
    _figure,
    _yerr,
    flat_bounds,
)
from rimo_eval.rimo.tracks import TRACKS
from rimo_eval.rimo.years import BAND_LABELS, OUTCOME, ordered_bands

# The report's own palette: RIMO-N as its domain bars, RIMO-P in the parts chart's second colour.
COLOURS = {"RIMO-N": DOMAIN_COLOUR, "RIMO-P": PARTS_SERIES[1][1]}


def has_bands(metrics: Mapping[str, Any]) -> bool:
    """Whether any band holds items (not so for scores made before the year lens)."""
    return any(cell.get("n") for t in TRACKS
               for cell in (((metrics.get(t) or {}).get("by_year_band")) or {}).values())


def year_chart(metrics: Mapping[str, Any]) -> Figure:
    """Both tracks side by side per band; a band without items has no bar."""
    import matplotlib.style

    with matplotlib.style.context("default"):
        fig, ax = _figure("Accuracy by competition year (RIMO-P: strict; 95% Wilson intervals)",
                          top=1.2)
        labels = [b for b in BAND_LABELS
                  if any(((metrics.get(t) or {}).get("by_year_band") or {}).get(b, {}).get("n")
                         for t in TRACKS)]
        width = 0.4
        for i, track in enumerate(TRACKS):
            name = OUTCOME[track]
            bands = dict(ordered_bands((metrics.get(track) or {}).get("by_year_band")))
            cells = [bands.get(b) or {} for b in labels]
            values = [float(c.get(name) or 0.0) for c in cells]
            found = [flat_bounds(c, name) for c in cells]
            xs = [j + (i - 0.5) * width for j in range(len(labels))]
            ax.bar(xs, values, width, yerr=_yerr(values, found), color=COLOURS[track],
                   label=f"{track} {name}", **ERROR_BAR)
        ax.set_xticks(range(len(labels)), [
            f"{b}\nn={'/'.join(str(((metrics.get(t) or {}).get('by_year_band') or {}).get(b, {}).get('n', 0)) for t in TRACKS)}"  # noqa: E501
            for b in labels])
        ax.legend(loc="upper center", ncols=2, fontsize="small")
    return fig


def year_lines(metrics: Mapping[str, Any]) -> list[str]:
    """One sentence per track: the trend, and the unseen subset where a cutoff is set."""
    out = []
    for track in TRACKS:
        block = metrics.get(track) or {}
        trend = block.get("year_trend") or {}
        if trend.get("slope") is None:
            text = f"{track}: no trend ({trend.get('reason') or 'not computed'})"
        else:
            text = (f"{track}: slope {trend['slope']:+.4f} log-odds per year "
                    f"[{trend['slope_ci_low']:+.4f}, {trend['slope_ci_high']:+.4f}], "
                    f"p = {trend['p_value']:.3g} (k = {trend['samples']}, "
                    f"{trend['n_items']} items)")
        unseen = block.get("unseen")
        if unseen:
            name = OUTCOME[track]
            u, s = unseen["unseen"], unseen["seen"]
            text += (f"; cutoff {unseen['cutoff']}: unseen {pct(u[name])} of {u['n']} "
                     f"[{pct(u[name + '_ci_low'])}, {pct(u[name + '_ci_high'])}] vs seen "
                     f"{pct(s[name])} of {s['n']}, difference {pct(unseen['difference'])} "
                     f"[{pct(unseen['difference_ci_low'])}, {pct(unseen['difference_ci_high'])}"
                     f"] (Newcombe), Fisher p = {unseen['fisher_p']}")
        out.append(text)
    return out


__all__ = ["year_chart", "year_lines"]
