"""The leaderboard table: one column list, rendered as Markdown and as booktabs LaTeX.

Rates are shown in percent to one decimal, from the run's own metrics.json value (the JSON keeps
the exact values); labels, models and every other text cell are escaped for the format.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2

from rimo_eval.artifacts import numbers
from rimo_eval.artifacts.numbers import fmt_p
from rimo_eval.render.markdown import md_cell, md_row
from rimo_eval.rimo.tracks import HEADLINE, TRACK_N, TRACK_P, TRACKS
from rimo_eval.rimo.years import OUTCOME

Row = Mapping[str, Any]
SHORT = {"accuracy": "acc.", "strict": "strict", "sub_problem_accuracy": "sub-prob.",
         "prefix_score": "prefix"}


def pct(x: Any) -> str:
    """A rate in percent, one decimal, no sign: the table's headers say percent."""
    return numbers.pct(x, "-", sign=False)


def with_ci(row: Row, name: str) -> str:
    value = row.get(name)
    low, high = row.get(f"{name}_ci_low"), row.get(f"{name}_ci_high")
    if value is None:
        return "-"
    if low is None or high is None:
        return pct(value)
    return f"{pct(value)} [{pct(low)}, {pct(high)}]"


def vs_leader(row: Row, samples: int) -> str:
    test = row.get("vs_leader")
    if test is None:
        return "leader"
    mark = " ▼" if test["below_leader"] else ""
    p = test["p_holm"]
    # A bootstrap p of 0 means no resample crossed 0: below 1 / resamples, not 0.
    shown = f"< {1 / samples:.2g}" if p == 0 and test["test"] != "exact McNemar" else fmt_p(p)
    return f"{shown}{mark}"


def tokens(row: Row) -> str:
    total = sum(int(row.get(f"{t}.usage.{k}") or 0) for t in TRACKS
                for k in ("prompt_tokens", "completion_tokens"))
    return f"{total:,}" if total else "-"


def cost(row: Row) -> str:
    values = [row.get(f"{t}.usage.cost_usd") for t in TRACKS]
    if all(v is None for v in values):
        return "-"
    return f"${sum(float(v or 0) for v in values):,.2f}"


def per_track(row: Row, key: str) -> str:
    return "/".join(str(row.get(f"{t}.{key}", "-")) for t in TRACKS)


def rank_cell(row: Row) -> str:
    r = row["rank"]
    return f"{r['rank']}" if r["low"] == r["high"] else f"{r['rank']} ({r['low']}-{r['high']})"


def _lens(row: Row, track: str, key: str) -> Mapping[str, Any] | None:
    """The run's year-lens block (``trend``, ``unseen``) of a track, where it has one."""
    return ((row.get("years") or {}).get(track) or {}).get(key)


def slope_cell(row: Row, track: str) -> str:
    """The year trend's slope (log-odds per year) with its interval, as breakdown.json has it;
    "-" where there is no finite estimate (every answer right, say)."""
    trend = _lens(row, track, "trend") or {}
    value, low, high = (trend.get(k) for k in ("slope", "slope_ci_low", "slope_ci_high"))
    if value is None:
        return "-"
    if low is None or high is None:
        return f"{value:+.3f}"
    return f"{value:+.3f} [{low:+.3f}, {high:+.3f}]"


def unseen_cell(row: Row, track: str) -> str:
    block = _lens(row, track, "unseen")
    return "-" if not block else with_ci(block["unseen"], OUTCOME[track])


Column = tuple[str, Callable[[Row], str], bool]  # header, cell, numeric (right-aligned)


def columns(board: Mapping[str, Any]) -> list[Column]:
    """The table's columns; the k-sample and judge columns appear only where they apply."""
    level = f"{board['bootstrap']['confidence'] * 100:g}%"
    samples = max(1, int(board["bootstrap"]["samples"]))
    cols: list[Column] = [
        (f"rank ({level} range)", rank_cell, True),
        ("run", lambda r: str(r["label"]), False),
        ("backend", lambda r: str(r["backend"]), False),
        ("model", lambda r: str(r["model"]), False),
        ("k", lambda r: str(r["k"]), True),
    ]
    for t in TRACKS:
        for m in HEADLINE[t]:
            cols.append((f"{t} {SHORT[m]}", functools.partial(with_ci, name=f"{t}.{m}"), True))
    if board["k"] > 1:
        for t in TRACKS:
            for m in HEADLINE[t]:
                cols.append((f"{t} {SHORT[m]} mean@k",
                             functools.partial(with_ci, name=f"{t}.mean_at_k.{m}"), True))
        cols += [(f"{TRACK_N} pass@k", lambda r: with_ci(r, f"{TRACK_N}.pass_at_k"), True),
                 (f"{TRACK_N} maj@k", lambda r: with_ci(r, f"{TRACK_N}.maj_at_k"), True),
                 (f"{TRACK_P} pass@k", lambda r: with_ci(r, f"{TRACK_P}.pass_at_k"), True)]
    # The test against the leader right after the metrics it tests: as the last of 25
    # columns at k = 2 it was past the right edge of a 1,400 px window (issue 43).
    cols.append((f"vs leader (Holm p, {board['ranked_by']})",
                 lambda r: vs_leader(r, samples), True))
    if any(r.get("judge") for r in board["runs"]):
        cols.append((f"{TRACK_P} prefix, judge (non-primary)",
                     lambda r: with_ci(r["judge"], f"{TRACK_P}.judge.prefix_score")
                     if r.get("judge") else "-", True))
    cols += year_columns(board)
    cols += [
        ("tokens", tokens, True),
        ("cost", cost, True),
        ("errors N/P", lambda r: per_track(r, "errors"), True),
        ("missing N/P", lambda r: per_track(r, "missing"), True),
        ("date", lambda r: (r.get("date") or "workspace")[:10], False),
        ("commit", lambda r: str(r["commit"]), False),
    ]
    return cols


def _has_lens(board: Mapping[str, Any], key: str) -> bool:
    return any(_lens(r, t, key) for r in board["runs"] for t in TRACKS)


CUTOFF = "training cutoff"
CUTOFF_HOW = "score.training_cutoff in params.yaml, or leaderboard --cutoff RUN=DATE"


def slope_header(track: str) -> str:
    return f"{track} year slope (breakdown)"


def unseen_header(track: str) -> str:
    return f"{track} unseen {SHORT[OUTCOME[track]]} (breakdown)"


def year_columns(board: Mapping[str, Any]) -> list[Column]:
    """The year lens (docs/accuracy_by_year.md), breakdowns, never a metric: each
    track's slope where a run has one, and the unseen subset where a run's cutoff is known."""
    cols: list[Column] = []
    if _has_lens(board, "trend"):
        cols += [(slope_header(t), functools.partial(slope_cell, track=t), True)
                 for t in TRACKS]
    if _has_lens(board, "unseen"):
        cols.append((CUTOFF, lambda r: str((r.get("years") or {}).get("cutoff") or "-"),
                     False))
        cols += [(unseen_header(t), functools.partial(unseen_cell, track=t), True)
                 for t in TRACKS]
    return cols


def notes(board: Mapping[str, Any]) -> list[str]:
    boot = board["bootstrap"]
    level = f"{boot['confidence'] * 100:g}%"
    alpha = 1 - float(boot["confidence"])
    out = [f"Values in % from each run's metrics.json with its {level} interval; ranked by "
           f"{board['ranked_by']} over {board['items'][TRACK_N]} {TRACK_N} and "
           f"{board['items'][TRACK_P]} gradable {TRACK_P} items, k = {board['k']}.",
           f"Rank range: paired bootstrap over items ({boot['samples']} resamples, seed "
           f"{boot['seed']}, the same items for every run). ▼: significantly below the leader "
           f"(Holm-adjusted p < {alpha:g}; exact McNemar on a 0/1 outcome at k = 1, paired "
           f"bootstrap of per-item means otherwise, as `rimo-eval compare`). In the forest "
           f"plots each panel tests its own metric so: blue its leader, red the runs "
           f"significantly below it."]
    floor = board.get("floor") or {}
    if floor.get("answer") is not None:
        out.append(f"Floor (context, not a metric): a constant \"{floor['answer']}\" scores "
                   f"{numbers.pct(floor['accuracy'])} on these {TRACK_N} items.")
    if any(r.get("judge") for r in board["runs"]):
        out.append("Judge columns are an LLM judge's grading, not the benchmark's primary "
                   "exact-match protocol.")
    if _has_lens(board, "trend"):
        out.append(f"Year slope (a breakdown, not a metric, never the rank): the change in "
                   f"log-odds of a right answer ({TRACK_N} accuracy, {TRACK_P} strict) per "
                   f"competition year, from each run's breakdown.json, with its Wald interval "
                   f"there; - where there is no finite estimate.")
    if _has_lens(board, "unseen"):
        out.append("Unseen (a breakdown, not a metric): the rate over the items of "
                   "competitions after the run's training cutoff (year > the cutoff's year), "
                   "with its Wilson interval; - where no cutoff is known.")
    elif _has_lens(board, "trend"):
        out.append(f"No unseen subset: no run has a training cutoff ({CUTOFF_HOW}), so the "
                   f"year heatmap's unseen column says \"no cutoff\".")
    return out


def left_out(board: Mapping[str, Any]) -> list[str]:
    """``--all``: each run found but not ranked, with the reason (not in the paper's tex)."""
    return [f"Left out by --all: {x['label']}: {x['reason']}"
            for x in board.get("left_out") or []]


# --- Markdown ----------------------------------------------------------------------------------


def render_markdown(board: Mapping[str, Any]) -> str:
    cols = columns(board)
    out = ["## RIMO leaderboard", "", md_row([c[0] for c in cols]),
           "| " + " | ".join("---:" if c[2] else "---" for c in cols) + " |"]
    out += [md_row([c[1](r) for c in cols]) for r in board["runs"]]
    out += [""] + [f"- {n}" for n in notes(board)]
    out += [f"- {md_cell(n)}" for n in left_out(board)]
    return "\n".join(out) + "\n"


# --- LaTeX (booktabs) --------------------------------------------------------------------------

TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
               "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
               "^": r"\textasciicircum{}", "▼": r"$\blacktriangledown$", "<": r"\textless{}",
               ">": r"\textgreater{}", "\n": " "}


def tex(text: str) -> str:
    return "".join(TEX_SPECIAL.get(ch, ch) for ch in text)


def render_tex(board: Mapping[str, Any]) -> str:
    """A ``table*`` with booktabs rules, scaled to the text width (needs booktabs, graphicx
    and amssymb for the ▼ mark)."""
    cols = columns(board)
    spec = "".join("r" if c[2] else "l" for c in cols)
    out = ["% rimo-eval leaderboard; needs \\usepackage{booktabs,graphicx,amssymb}",
           "\\begin{table*}[t]", "\\centering", "\\small",
           "\\resizebox{\\textwidth}{!}{%", f"\\begin{{tabular}}{{{spec}}}", "\\toprule",
           " & ".join(tex(c[0]) for c in cols) + " \\\\", "\\midrule"]
    out += [" & ".join(tex(c[1](r)) for c in cols) + " \\\\" for r in board["runs"]]
    out += ["\\bottomrule", "\\end{tabular}}",
            f"\\caption{{RIMO leaderboard. {tex(' '.join(notes(board)).replace('`', ''))}}}",
            "\\label{tab:rimo-leaderboard}", "\\end{table*}"]
    return "\n".join(out) + "\n"


# --- HTML ---------------------------------------------------------------------------------------


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    return env.get_template("leaderboard.html.j2")


# Untrusted names of any length (a run, a served model, a replay path): they wrap in HTML.
WRAPPED = ("run", "model")
# In HTML, these columns' cells go under that one's, one column for all, under this header:
# with the year lens's RIMO-P column and the cutoff under its RIMO-N one, a real run's table
# (year slopes, unseen subsets) stays in a 1,280 px window.
STACKED = {"date": (("commit",), "date / commit"), "tokens": (("cost",), "tokens / cost"),
           "errors N/P": (("missing N/P",), "errors / missing N/P"),
           slope_header(TRACK_N): ((slope_header(TRACK_P),),
                                   f"{TRACK_N} / {TRACK_P} year slope (breakdown)"),
           unseen_header(TRACK_N): ((unseen_header(TRACK_P), CUTOFF),
                                    f"{TRACK_N} / {TRACK_P} unseen (breakdown) / {CUTOFF}")}
Line = tuple[str, str]  # text, CSS class of its own line under the cell's value
Cell = tuple[str, list[Line], str]  # value, lines under it, CSS classes


def _html_cell(column: Column, row: Row) -> Cell:
    """(text, lines, CSS classes): the interval of ``with_ci`` goes on its own line, so a
    column is as wide as its value, not value and interval side by side."""
    header, cell, numeric = column
    text, lines = cell(row), []
    value, sep, rest = text.rpartition(" [")
    if numeric and sep and rest.endswith("]"):
        text, lines = value, [(f"[{rest}", "ci")]
    classes = ["num"] if numeric else ["name"] if header in WRAPPED else []
    if header.startswith("vs leader"):
        classes.append("test")
    return text, lines, " ".join(classes)


def render_html(board: Mapping[str, Any], figures: Mapping[str, Mapping[str, bytes]]) -> str:
    """One offline page: no script, nothing fetched (a CSP says so), figures as data: URIs.
    The same cells as the Markdown, laid out to fit a laptop's window: intervals under their
    values, the commit under its date, the cost under the tokens, the missing under the
    errors, each RIMO-P year-lens value (and the cutoff) under its RIMO-N one."""
    cols = columns(board)
    names = {c[0] for c in cols}
    pairs = {above: below for above, (below, _) in STACKED.items()
             if above in names and set(below) <= names}
    stacked = {c for below in pairs.values() for c in below}
    rows = []
    for r in board["runs"]:
        cells = {c[0]: _html_cell(c, r) for c in cols}
        for above, below in pairs.items():
            text, lines, cls = cells[above]
            for column in below:
                under, under_lines, _ = cells[column]
                lines = [*lines, (under, "sub"), *under_lines]
            cells[above] = (text, lines, cls)
        rows.append({"below": bool((r.get("vs_leader") or {}).get("below_leader")),
                     "cells": [v for k, v in cells.items() if k not in stacked]})
    head = [STACKED[c[0]][1] if c[0] in pairs else c[0] for c in cols if c[0] not in stacked]
    figs = [{"name": name, "data": base64.b64encode(f["png"]).decode("ascii")}
            for name, f in figures.items()]
    return _template().render(head=head, rows=rows, notes=notes(board) + left_out(board),
                              figures=figs)


__all__ = ["columns", "left_out", "notes", "pct", "render_html", "render_markdown", "render_tex",
           "slope_cell", "tex", "unseen_cell", "with_ci", "year_columns"]
