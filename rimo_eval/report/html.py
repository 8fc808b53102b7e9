"""HTML for the report's tables and banner, from jinja2 templates with autoescape.

Built from templates (not pandas' Styler, whose ids are random) so the output is byte-stable.
Each function returns :class:`Html`, a ``str`` that a notebook displays as HTML.
"""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

import jinja2
import pandas as pd

from rimo_eval.artifacts.numbers import absent
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

MAX_FINDINGS = 200  # rows of a findings table; the rest are counted, not listed
# Math must never be rendered from model or upstream text: the report's KaTeX renders its
# Markdown cells only (rimo_eval/report/nbconvert/rimo), and skips <pre> and these classes too.
NO_MATH = "tex2jax_ignore mathjax_ignore"
# A number as the tables print it: 12, 1,000, 0.500, 57.1%.
_NUMBER = re.compile(r"[-+]?\d[\d,]*(\.\d+)?%?")


class Html(str):
    """Markup that IPython's ``display`` shows rendered; its plain-text form stays short."""

    def _repr_html_(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return "<HTML>"


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("rimo_eval.report", "templates"), autoescape=True,
        trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def _render(template: str, **context: Any) -> Html:
    return Html(_env().get_template(template).render(**context).strip())


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return False
    if isinstance(value, numbers.Number):
        return True
    return isinstance(value, str) and _NUMBER.fullmatch(value) is not None


def align(values: Iterable[Any]) -> str:
    """"right" for a column of numbers (blanks and dashes aside), "left" for text."""
    present = [v for v in values if not absent(v) and not (isinstance(v, str) and v in ("", "—"))]
    return "right" if present and all(_is_number(v) for v in present) else "left"


def _text(value: Any) -> str:
    if absent(value):
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def table(frame: pd.DataFrame, pre: Sequence[str] = (), *, title: str | None = None,
          caption: str | None = None, empty: str = "None.", limit: int | None = None,
          source: str | os.PathLike[str] | None = None, links: Mapping[str, str] | None = None,
          nowrap: Sequence[str] = ()) -> Html:
    """``frame`` as an HTML table: text columns left-aligned, numbers right-aligned, ``pre``
    columns (left-aligned) keeping their line breaks. With ``limit``, only the first rows are
    listed and the rest are counted, pointing to ``source``. ``links`` maps a column to the
    column holding its link target (not shown itself; targets are built by the report, never
    taken from model text); ``nowrap`` columns never break a line (long gold integers)."""
    links = dict(links or {})
    shown = frame if limit is None else frame.head(max(limit, 0))
    visible = [c for c in frame.columns if c not in links.values()]
    # Preformatted text (answers, model output) reads left to right even when it is a number.
    aligns = {c: "left" if c in pre else align(frame[c]) for c in visible}
    columns = [{"name": str(c), "align": aligns[c], "nowrap": c in nowrap} for c in visible]
    rows = []
    for row in shown.to_dict("records"):
        rows.append([{"text": _text(row[c]), "pre": c in pre, "align": aligns[c],
                      "nowrap": c in nowrap, "href": str(row[links[c]]) if c in links else ""}
                     for c in visible])
    return _render("table.html.j2", title=title, caption=caption, empty=empty, rows=rows,
                   columns=columns, no_math=NO_MATH, more=len(frame) - len(shown),
                   source=os.fspath(source) if source is not None else "")


def capped_table(frame: pd.DataFrame, source: str | os.PathLike[str], *,
                 title: str | None = None, limit: int = MAX_FINDINGS) -> Html:
    """The first ``limit`` findings (there can be many); the rest are counted and pointed to."""
    return table(frame, pre=["message"], title=title, limit=limit, source=source)


def style() -> Html:
    """The stylesheet for the tables and the banner (shown once, at the top of the report)."""
    return _render("style.html.j2")


def sample_banner(metrics: Mapping[str, Any]) -> Html:
    """A warning when only a sample was evaluated; empty for a full run.

    Read from metrics.json alone: the score stage records the ``predict.limit`` and
    ``predict.sample_seed`` of the run, which params.yaml may no longer hold.
    """
    sample = metrics.get("sample") or {}
    if not sample.get("is_sample"):
        return Html("")
    evaluated, total = sample.get("evaluated") or {}, sample.get("total") or {}
    parts = [f"{evaluated.get(t, '?')} of {total.get(t, '?')} {t}" for t in (TRACK_N, TRACK_P)]
    return _render("banner.html.j2", parts=parts, limit=sample.get("limit"),
                   seed=sample.get("seed"))


def run_header(rows: Sequence[tuple[str, str]], view_href: str) -> Html:
    """The box at the top naming the run (rimo_eval.report.selection.run_rows) and linking to the
    browser of every item."""
    return _render("run_header.html.j2", rows=list(rows), view_href=view_href)


def link(text: str, href: str) -> Html:
    """One escaped link (the report's own targets only)."""
    return _render("link.html.j2", text=text, href=href)
