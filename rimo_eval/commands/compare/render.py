"""The comparison as Markdown (a PR comment) and as a self-contained HTML page.

Markdown cells are escaped by ``render.markdown.md_cell``; the HTML comes from a jinja2 template
with autoescape, so no value reaches the page unescaped.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from rimo_eval.artifacts.numbers import fmt_p, pct
from rimo_eval.commands.compare.arguments import FLIPS
from rimo_eval.commands.compare.details import FLIP_HEAD, flip_cells
from rimo_eval.io.outputs import generator
from rimo_eval.render.markdown import md_cell, md_row
from rimo_eval.rimo.tracks import TRACKS

TOOL = "compare"  # the page's mark (io/outputs.py): --html replaces only a page of compare's

TEMPLATES = Path(__file__).parent / "templates"


def fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.6f}" if isinstance(x, float) else str(x)


def fmt_delta(x: Any) -> str:
    return "-" if x is None else f"{x:+.6f}" if isinstance(x, float) else f"{x:+d}"


def fmt_ci(ci: Mapping[str, float] | None) -> str:
    return "-" if not ci else f"[{ci['low']:+.4f}, {ci['high']:+.4f}]"


def _side_cells(side: Mapping[str, Any]) -> dict[str, str]:
    rev = side["rev"][:12] if side["rev"] else "working tree"
    cells = {"revision": f"{side['label']} ({side['kind']}, {rev})"}
    for t in TRACKS:
        p = (side.get("predictions") or {}).get(t) or {}
        cells[f"{t} predictions"] = (f"{p.get('backend')} {str(p.get('fingerprint'))[:12]}"
                                     if p else "unknown (no provenance block)")
    cells["params fingerprint"] = str(side.get("params_fingerprint") or "-")[:12]
    return cells


def items_note(result: Mapping[str, Any]) -> str | None:
    """The line that opens the output when the two runs' item sets differ."""
    items = result.get("items") or {}
    if items.get("same", True):
        return None
    return (f"The runs evaluated different items: {items['note']}. Everything below (A, B, Δ, "
            f"intervals, tests, flips) is over the shared items only; --strict refuses such "
            f"a pair.")


def _shown_flips(t: Mapping[str, Any], cap: int | None) -> tuple[list[Any], str]:
    """The flips to list and a note when some are left out."""
    listed = t["flips"] if cap is None else t["flips"][:cap]
    left = len(t["flips"]) - len(listed)
    note = (f"first {len(listed)} of {len(t['flips'])} by problem_id; --all-flips lists every "
            f"one, --json holds them all") if left else ""
    return listed, note


FLOOR_TITLE = "RIMO-N floor and answer types (context, not a metric)"
FLOOR_HEAD = ["RIMO-N answer type", "A", "B"]
TYPE_LABELS = {"0/1": "gold 0 or 1", "other": "other gold"}


def _type_cell(cell: Mapping[str, Any] | None) -> str:
    if not cell or not cell.get("n"):
        return "-"
    return (f"{pct(cell.get('accuracy'))} [{pct(cell.get('accuracy_ci_low'))}, "
            f"{pct(cell.get('accuracy_ci_high'))}] ({cell.get('right')}/{cell.get('n')})")


def floor_rows(result: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Each side's floor line, and one row per answer type (accuracy, interval, right/n)."""
    floors = result.get("floors") or {}
    a, b = floors.get("a") or {}, floors.get("b") or {}
    lines = [f"{side}: {f['line']}" for side, f in (("A", a), ("B", b)) if f.get("line")]
    rows = [[label, _type_cell((a.get("by_answer_type") or {}).get(key)),
             _type_cell((b.get("by_answer_type") or {}).get(key))]
            for key, label in TYPE_LABELS.items()
            if (a.get("by_answer_type") or {}).get(key) or (b.get("by_answer_type") or {}).get(key)]
    return lines, rows


def _param_value(x: Any) -> str:
    return "-" if x is None else str(x)


def render_markdown(result: Mapping[str, Any], cap: int | None = FLIPS) -> str:
    a, b = result["a"], result["b"]
    boot = result["bootstrap"]
    level = f"{boot['confidence'] * 100:g}%"
    out = [f"## RIMO comparison: A = {md_cell(a['label'])}, B = {md_cell(b['label'])}", ""]
    if (note := items_note(result)) is not None:
        out += [f"**{md_cell(note)}**", ""]
    ca, cb = _side_cells(a), _side_cells(b)
    out += ["| | A | B |", "| --- | --- | --- |"]
    out += [md_row([k, ca[k], cb[k]]) for k in ca]
    out += ["", "### Metrics", "", f"| metric | A | B | Δ (B - A) | {level} CI of Δ |",
            "| --- | ---: | ---: | ---: | :---: |"]
    out += [md_row([r["name"], fmt(r["a"]), fmt(r["b"]), fmt_delta(r["delta"]), fmt_ci(r["ci"])])
            for r in result["metrics"] if r["rate"]]
    out += ["", f"Intervals: paired bootstrap over items, {boot['samples']} resamples, seed "
            f"{boot['seed']}.", "", "<details><summary>counts</summary>", "",
            "| count | A | B | Δ (B - A) |", "| --- | ---: | ---: | ---: |"]
    out += [md_row([r["name"], fmt(r["a"]), fmt(r["b"]), fmt_delta(r["delta"])])
            for r in result["metrics"] if not r["rate"]]
    out += ["", "</details>"]
    lines, types = floor_rows(result)
    if lines:
        out += ["", f"### {FLOOR_TITLE}", ""] + [f"- {md_cell(line)}" for line in lines]
        if types:
            out += ["", md_row(FLOOR_HEAD), "| --- | ---: | ---: |"] + [md_row(r) for r in types]
    out += ["", "### Paired tests", "",
            "| track | test | paired items | right in A only | right in B only | p (two-sided) |",
            "| --- | --- | ---: | ---: | ---: | ---: |"]
    for track, t in result["tracks"].items():
        for test in filter(None, (t["test"], t.get("maj_test"))):
            out.append(md_row([track, f"{test['name']} on {test['metric']}", t["paired"],
                                test["right_in_a_only"], test["right_in_b_only"],
                                fmt_p(test["p_value"])]))
    out += [""] + [f"- {track}: {md_cell(t['note'])}" for track, t in result["tracks"].items()
                   if t.get("note")]
    diff = result.get("params_diff") or []
    out += ["", "### Params that differ", ""]
    if diff:
        out += ["| param | A | B |", "| --- | --- | --- |"]
        out += [md_row([d["param"], _param_value(d["a"]), _param_value(d["b"])]) for d in diff]
    else:
        out.append("none (or a side has no params.yaml)")
    out += ["", "### Flipped items"]
    for track, t in result["tracks"].items():
        test = t["test"]
        out += ["", f"**{track}** ({test['metric']}): {len(t['flips'])} flipped: "
                f"{test['right_in_a_only']} right in A and wrong in B, "
                f"{test['right_in_b_only']} wrong in A and right in B"]
        listed, note = _shown_flips(t, cap)
        if listed:
            out += ["", "| " + " | ".join(FLIP_HEAD) + " |",
                    "| " + " | ".join("---" for _ in FLIP_HEAD) + " |"]
            out += [md_row([f["problem_id"], f["domain"] or "-", *flip_cells(track, f)])
                    for f in listed]
        if note:
            out += ["", f"({note})"]
    return "\n".join(out) + "\n"


def _sign(x: Any) -> str:
    return "num" + (" neg" if _number(x) and x < 0 else " pos" if _number(x) and x > 0 else "")


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("compare.html.j2")


def render_html(result: Mapping[str, Any], cap: int | None = FLIPS) -> str:
    """A self-contained page (no scripts, nothing fetched; the chart is a PNG data URI); the
    template escapes every value."""
    a, b = result["a"], result["b"]
    boot = result["bootstrap"]
    level = f"{boot['confidence'] * 100:g}%"
    ca, cb = _side_cells(a), _side_cells(b)
    lines, types = floor_rows(result)
    tracks = []
    for track, t in result["tracks"].items():
        listed, note = _shown_flips(t, cap)
        tracks.append({
            "more": note,
            "caption": f"{track}: {len(t['flips'])} flipped on {t['test']['metric']}",
            "flips": [[(f["problem_id"], ""), (f["domain"] or "-", ""),
                       *((c, "text") for c in flip_cells(track, f))] for f in listed]})
    # Here, not at the top: matplotlib takes a second to import, and only the page draws.
    from rimo_eval.commands.compare.chart import data_uri, delta_chart

    fig = delta_chart(result["metrics"], level)
    return _template().render(
        a=a, b=b, items_note=items_note(result),
        generator=markupsafe.Markup(generator(TOOL)),  # how --html knows its own page again
        sides=[[(k, ""), (ca[k], ""), (cb[k], "")] for k in ca],
        metrics_head=["metric", "A", "B", "Δ (B - A)",
                      f"{boot['confidence'] * 100:g}% CI of Δ"],
        metrics=[[(r["name"], ""), (fmt(r["a"]), "num"), (fmt(r["b"]), "num"),
                  (fmt_delta(r["delta"]), _sign(r["delta"])), (fmt_ci(r["ci"]), "num")]
                 for r in result["metrics"] if r["rate"]],
        counts_head=["count", "A", "B", "Δ (B - A)"],
        counts=[[(r["name"], ""), (fmt(r["a"]), "num"), (fmt(r["b"]), "num"),
                 (fmt_delta(r["delta"]), _sign(r["delta"]))]
                for r in result["metrics"] if not r["rate"]],
        params_head=["param", "A", "B"],
        params=[[(d["param"], ""), (_param_value(d["a"]), "text"), (_param_value(d["b"]), "text")]
                for d in result.get("params_diff") or []],
        chart=data_uri(fig) if fig is not None else None,
        chart_alt=f"B - A per rate metric with its {level} paired-bootstrap interval",
        flip_head=FLIP_HEAD,
        metrics_caption=f"Metrics (paired bootstrap, {boot['samples']} resamples, seed "
                        f"{boot['seed']})",
        tests_head=["track", "test", "paired items", "right in A only", "right in B only",
                    "p (two-sided)"],
        tests=[[(track, ""), (f"{t['test']['name']} on {t['test']['metric']}", ""),
                (t["paired"], "num"), (t["test"]["right_in_a_only"], "num"),
                (t["test"]["right_in_b_only"], "num"), (fmt_p(t["test"]["p_value"]), "num")]
               for track, t in result["tracks"].items()],
        floor_title=FLOOR_TITLE, floor_lines=lines, floor_head=FLOOR_HEAD,
        floor_types=[[(r[0], ""), (r[1], "num"), (r[2], "num")] for r in types],
        tracks=tracks)


__all__ = ["floor_rows", "fmt", "fmt_ci", "fmt_delta", "items_note", "render_html",
           "render_markdown"]
