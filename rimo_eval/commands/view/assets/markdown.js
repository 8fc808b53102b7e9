// rimo-eval view: untrusted text to inert HTML, in the page, when a text is shown (the site
// ships each text once, compressed: rimo_eval/commands/view/packing.py).
// markdown-it parses with raw HTML, links, images and autolinks off, so `<script>` or
// `[x](javascript:...)` stay visible text; the math rules below keep $...$, $$...$$, \(...\)
// and \[...\] (mid-line too) away from the emphasis rules and emit the TeX escaped in
// span.math / div.math for KaTeX (text.js, trust: false). DOMPurify then cleans the result
// against a short allowlist (no attribute but the math classes, no URL at all): a second wall
// should the parser ever emit something unexpected. Both are pinned in package-lock.json and
// copied into the site; neither evaluates code, so the CSP (no eval) holds.
"use strict";

const RIMO_MARKDOWN = (() => {
  const TAGS = ["p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
                "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
                "span", "div", "s", "del"];
  const MATH_CLASS = /^math (inline|display)$/;
  function esc(s) {
    // Plain text as HTML text or attribute value (the page's one escaper: text.js, app.js).
    return String(s == null ? "" : s).replace(/[&<>"']/g, c => (
      { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }

  function closing(src, from, close) {
    // The next `close` at or after `from` not escaped by a backslash (-1: none).
    let at = src.indexOf(close, from);
    while (at > 0 && close === "$" && src.charCodeAt(at - 1) === 0x5c) at = src.indexOf(close, at + 1);
    return at;
  }
  function mathInline(state, silent) {
    // \(...\), \[...\] (display, also mid-line: RIMO's solutions write it so), $$...$$
    // (display) and $...$; runs before the escape rule eats "\[". Unclosed: plain text.
    const src = state.src, pos = state.pos;
    let open, close, display;
    if (src.startsWith("\\(", pos)) [open, close, display] = ["\\(", "\\)", false];
    else if (src.startsWith("\\[", pos)) [open, close, display] = ["\\[", "\\]", true];
    else if (src.startsWith("$$", pos)) [open, close, display] = ["$$", "$$", true];
    else if (src.charCodeAt(pos) === 0x24) [open, close, display] = ["$", "$", false];
    else return false;
    const end = closing(src, pos + open.length, close);
    if (end < 0 || end === pos + open.length) return false;
    if (!silent) {
      const token = state.push(display ? "math_display" : "math_inline", "math", 0);
      token.content = src.slice(pos + open.length, end);
    }
    state.pos = end + close.length;
    return true;
  }
  function mathBlock(state, startLine, endLine, silent) {
    // A block that opens with $$ or \[ and closes with $$ or \] at the end of a line, blank
    // lines in it or not.
    if (state.sCount[startLine] - state.blkIndent >= 4) return false;
    const src = state.src, pos = state.bMarks[startLine] + state.tShift[startLine];
    const close = src.startsWith("$$", pos) ? "$$" : src.startsWith("\\[", pos) ? "\\]" : null;
    if (!close) return false;
    const end = closing(src, pos + 2, close);
    if (end < 0) return false;
    let line = startLine;
    while (line < endLine && state.eMarks[line] < end + 2) line++;
    if (line >= endLine || src.slice(end + 2, state.eMarks[line]).trim()) return false;
    if (silent) return true;
    const token = state.push("math_block", "math", 0);
    token.block = true;
    token.content = src.slice(pos + 2, end);
    token.map = [startLine, line + 1];
    state.line = line + 1;
    return true;
  }

  // LaTeX text styles in prose (upstream's problems write \emph{...}): as Markdown's own
  // emphasis, their content parsed inline like any text (escaped, math kept), so they add no
  // way in for markup. Unbalanced braces: plain text.
  const TEX_STYLE = { emph: "em", textit: "em", textsl: "em", textbf: "strong",
                      bf: "strong", it: "em" };
  function texStyle(state, silent) {
    const src = state.src, pos = state.pos;
    const m = /^\\([a-z]+)\{/.exec(src.slice(pos, pos + 12));
    if (!m || !(m[1] in TEX_STYLE)) return false;
    const start = pos + m[0].length;
    let depth = 1, end = start;
    for (; end < state.posMax && depth; end++) {
      const c = src.charCodeAt(end);
      if (c === 0x5c) end++;  // \{ and \} do not count
      else if (c === 0x7b) depth++;
      else if (c === 0x7d) depth--;
    }
    if (depth) return false;
    end--;  // at the closing brace
    if (!silent) {
      const tag = TEX_STYLE[m[1]], max = state.posMax;
      state.push(`${tag}_open`, tag, 1);
      state.pos = start;
      state.posMax = end;
      state.md.inline.tokenize(state);
      state.push(`${tag}_close`, tag, -1);
      state.posMax = max;
    }
    state.pos = end + 1;
    return true;
  }

  let md = null;
  function parser() {
    if (md) return md;
    md = window.markdownit("commonmark", { html: false, linkify: false, typographer: false });
    md.disable(["link", "image", "autolink", "html_inline", "html_block"], true);
    md.inline.ruler.before("escape", "math_inline", mathInline);
    md.inline.ruler.before("escape", "tex_style", texStyle);
    md.block.ruler.before("fence", "math_block", mathBlock,
                          { alt: ["paragraph", "reference", "blockquote", "list"] });
    const math = (tag, cls) => (tokens, idx) =>
      `<${tag} class="${cls}">${esc(tokens[idx].content.trim())}</${tag}>`;
    md.renderer.rules.math_inline = math("span", "math inline");
    md.renderer.rules.math_display = math("span", "math display");
    md.renderer.rules.math_block = math("div", "math display");
    // No class from the parser but the math ones (a fence's "language-x" goes).
    window.DOMPurify.addHook("uponSanitizeAttribute", (node, data) => {
      if (data.attrName === "class" && !MATH_CLASS.test(data.attrValue)) data.keepAttr = false;
    });
    return md;
  }
  const CLEAN = { ALLOWED_TAGS: TAGS, ALLOWED_ATTR: ["class"], ALLOW_DATA_ATTR: false,
                  ALLOW_ARIA_ATTR: false, ALLOWED_URI_REGEXP: /^$/, KEEP_CONTENT: true };
  function clean(html) {
    parser();  // its hook on DOMPurify
    return window.DOMPurify.sanitize(html, CLEAN);
  }
  function render(text) {
    // Markdown and math of `text` as inert HTML.
    if (!text) return "";
    return clean(parser().render(text));
  }

  async function unpack(blob) {
    // The item's texts: base64 -> one Zstandard frame (fzstd, pinned) -> UTF-8 JSON array
    // (JSON.parse, never eval).
    if (!blob) return [];
    const chars = atob(blob);
    const bytes = new Uint8Array(chars.length);
    for (let i = 0; i < chars.length; i++) bytes[i] = chars.charCodeAt(i);
    return JSON.parse(new TextDecoder("utf-8").decode(window.fzstd.decompress(bytes)));
  }
  return { clean, esc, render, unpack };
})();
