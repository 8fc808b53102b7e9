"""Untrusted text (model replies, problems, judge reasons) to inert HTML, at build time.

Markdown is parsed by markdown-it-py with raw HTML, links, images and autolinks switched off,
so ``<script>`` or ``[x](javascript:...)`` stay visible text; dollarmath and texmath keep math
away from the emphasis rules and emit it as escaped TeX in ``span.math`` for KaTeX to render
in the page (``trust: false``). nh3 then cleans the result against a short allowlist (no
attributes but the math classes, no URLs at all), a second wall should the parser ever emit
something unexpected.

A long text is folded (``page_text``): it is cut into blocks of at most ``FOLD_CHARS`` characters,
at a blank line where there is one; the page lays out the first and each next one on request,
never the whole text at once. Markdown costs 10-40 µs a character here (math-dense or
pathological text), so only the first ``RENDER_CHARS`` are rendered; the blocks after them
(a 10 MB reply) are shown as plain text, ``PLAIN_CHARS`` at a time.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.texmath import texmath_plugin

TAGS = {"p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
        "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
        "span", "div", "s", "del"}
MATH_CLASSES = {"math", "inline", "display"}
# Rendered texts are cached: k samples of one item often repeat a reply verbatim. The site is
# built item by item, so a few items' worth is enough; 65,536 entries held the inputs and HTML
# of every reasoning text of a k = 64 run (issue 20).
CACHE_SIZE = 512
# The characters of a text laid out at once on an item page (a reply of this size renders in
# well under a second); longer texts are folded into blocks of this size.
FOLD_CHARS = 10_000
RENDER_CHARS = 100_000  # of a text, rendered as Markdown and math; the rest is plain text
PLAIN_CHARS = 100_000  # a block of the plain rest


def _bracket_display(state: StateInline, silent: bool) -> bool:
    r"""``\[ ... \]`` in the middle of a line (RIMO's solutions write display math so); texmath's
    bracket rule only takes it at the start of a block. Runs before the escape rule eats ``\[``."""
    src, pos = state.src, state.pos
    if not src.startswith("\\[", pos):
        return False
    end = src.find("\\]", pos + 2)
    if end < 0:
        return False
    if not silent:
        token = state.push("math_inline_double", "math", 0)
        token.content = src[pos + 2:end]
        token.markup = "\\["
    state.pos = end + 2
    return True


def _math(display: bool, block: bool) -> Any:
    tag = "div" if block else "span"
    cls = "math display" if display else "math inline"

    def render(self: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
        return f'<{tag} class="{cls}">{escape(tokens[idx].content.strip(), quote=False)}</{tag}>'
    return render


@lru_cache(maxsize=1)
def parser() -> MarkdownIt:
    md = (MarkdownIt("commonmark", {"html": False, "linkify": False})
          .use(dollarmath_plugin, allow_space=True, allow_digits=True, double_inline=True)
          .use(texmath_plugin, delimiters="brackets"))
    md.disable(["link", "image", "autolink", "html_inline", "html_block"], ignoreInvalid=True)
    md.inline.ruler.before("escape", "bracket_display", _bracket_display)
    for name in ("math_inline",):
        md.add_render_rule(name, _math(False, False))
    for name in ("math_inline_double",):
        md.add_render_rule(name, _math(True, False))
    for name in ("math_block", "math_block_eqno", "math_block_label"):
        md.add_render_rule(name, _math(True, True))
    return md


def clean(html: str) -> str:
    return nh3.clean(html, tags=TAGS, attributes={}, allowed_classes={
        "span": MATH_CLASSES, "div": MATH_CLASSES}, url_schemes=set(), link_rel=None,
        strip_comments=True, clean_content_tags={"script", "style"})


@lru_cache(maxsize=CACHE_SIZE)
def render(text: str | None) -> str:
    """Markdown and math of ``text`` as inert HTML ('' for no text)."""
    if not text:
        return ""
    return clean(parser().render(text))


def blocks(text: str, size: int, start: int = 0, stop: int | None = None) -> list[str]:
    """``text[start:stop]`` cut into blocks of at most ``size`` characters: after the last
    blank line of a block's second half, else after its last line break, else at ``size``."""
    stop = len(text) if stop is None else stop
    out = []
    while stop - start > size:
        low, high = start + size // 2, start + size
        cut = text.rfind("\n\n", low, high) + 2  # after the blank line (2 if none)
        if cut < low:
            cut = text.rfind("\n", low, high) + 1
        if cut < low:
            cut = high
        out.append(text[start:cut])
        start = cut
    if stop > start:
        out.append(text[start:stop])
    return out


def page_text(value: str | None) -> str | dict[str, Any]:
    """What the page shows of a text: its HTML, or for a text longer than ``FOLD_CHARS``
    ``fold`` (the HTML of each block of its first ``RENDER_CHARS``), ``plain`` (the blocks of
    the rest, as text), ``ends`` (the character offset where each block ends) and ``chars``."""
    if not value or len(value) <= FOLD_CHARS:
        return render(value)
    rendered: list[str] = []
    done = 0
    for part in blocks(value, FOLD_CHARS, 0, min(len(value), RENDER_CHARS + FOLD_CHARS)):
        if rendered and done + len(part) > RENDER_CHARS:
            break  # the rendered blocks end at a cut of their own, not mid-paragraph
        rendered.append(part)
        done += len(part)
    plain = blocks(value, PLAIN_CHARS, done)
    ends, at = [], 0
    for part in (*rendered, *plain):
        at += len(part)
        ends.append(at)
    return {"fold": [clean(parser().render(p)) for p in rendered], "plain": plain,
            "ends": ends, "chars": len(value)}


__all__ = ["FOLD_CHARS", "PLAIN_CHARS", "RENDER_CHARS", "blocks", "clean", "page_text", "parser",
           "render"]
