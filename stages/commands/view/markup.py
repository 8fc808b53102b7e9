"""Untrusted text (model replies, problems, judge reasons) to inert HTML, at build time.

Markdown is parsed by markdown-it-py with raw HTML, links, images and autolinks switched off,
so ``<script>`` or ``[x](javascript:...)`` stay visible text; dollarmath and texmath keep math
away from the emphasis rules and emit it as escaped TeX in ``span.math`` for KaTeX to render
in the page (``trust: false``). nh3 then cleans the result against a short allowlist (no
attributes but the math classes, no URLs at all), a second wall should the parser ever emit
something unexpected.
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


__all__ = ["clean", "parser", "render"]
