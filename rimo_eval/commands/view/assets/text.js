// rimo-eval view: untrusted text on the item page, bounded so that no model text can crash
// or hang it. Every text is rendered when shown (markdown.js: markdown-it, then DOMPurify) a
// block at a time, or a source shown through esc(); math goes to KaTeX only within the limits
// below. app.js builds the pages.
"use strict";

const RIMO_TEXT = (() => {
  const KATEX = { trust: false, maxExpand: 1000, maxSize: 10, throwOnError: false,
                  strict: "ignore", output: "htmlAndMathml" };
  // Model text is arbitrary: what KaTeX is given is bounded, the rest stays TeX source with a
  // note. 150 nested \frac laid out by KaTeX crash Chromium's renderer (the tab dies); a
  // 5,000-row array takes seconds. The length and nesting of the TeX are checked before KaTeX
  // runs, the depth of the tree it built before that enters the page (a legit formula is
  // under 100 levels; the crashes began past 1,000). Rendered formulas are costly to lay out
  // (600 in one paragraph took seconds), so the first `count` (at most `first` ms) render
  // into the item page before it enters the document, in DOM order; each other one when it
  // comes near the screen, at most `slice` ms at a time. The page never hangs.
  // Measured: README, "Browsing every answer"; tested: tests/e2e/test_view_browser.py (fuzz).
  const MATH_LIMITS = { chars: 2000, nesting: 24, dom: 200, count: 60, first: 300, slice: 30 };
  const PRED_CHARS = 500;  // a prediction, gold answer or error shown inline, at most

  const esc = RIMO_MARKDOWN.esc;
  function num(x) { return Number(x).toLocaleString("en-US"); }
  // Characters a reader cannot see but exact match can: controls, zero-width and bidi marks.
  const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb]/g;
  function literal(s) {
    // A short plain text (prediction, gold, error): escaped, its invisible characters named,
    // and cut at PRED_CHARS (a 1 MB "prediction" is not laid out whole).
    const str = String(s == null ? "" : s);
    const cut = str.length > PRED_CHARS ? str.slice(0, PRED_CHARS) : str;
    const out = esc(cut).replace(INVISIBLE, c => `<span class="cc">U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}</span>`);
    return str.length > PRED_CHARS ? out + `<span class="muted"> … (${num(str.length - PRED_CHARS)} more characters)</span>` : out;
  }
  function loadScript(src) {
    // Data come as script files: Chromium blocks fetch() of file://.
    return new Promise((resolve, reject) => {
      const el = document.createElement("script");
      el.src = src;
      el.onload = () => resolve();
      el.onerror = () => reject(new Error("cannot load " + src));
      document.body.appendChild(el);
    });
  }

  // The formulas waiting to render, in DOM order (reset whenever the page changes).
  let mathQueue = [], mathNext = 0;
  function texNesting(tex) {
    // The deepest nesting of groups, \left..\right, \begin..\end and \sqrt[..]: a closer
    // that does not match its opener is ignored (unbalanced input stays harmless).
    const open = { "{": "}", "\\left": "\\right", "\\begin": "\\end", "[": "]" };
    const stack = [];
    let max = 0;
    for (const m of tex.matchAll(/\\(?:left|right|begin|end)(?![A-Za-z])|\\sqrt\s*\[|\\[^A-Za-z]|[{}\]]/g)) {
      const t = m[0].startsWith("\\sqrt") ? "[" : m[0];
      if (open[t]) { stack.push(open[t]); if (stack.length > max) max = stack.length; }
      else if (stack.length && stack[stack.length - 1] === t) stack.pop();
    }
    return max;
  }
  function domDepth(root, limit) {
    // Depth of a detached tree, stopping once past limit.
    let max = 0;
    const todo = [[root, 0]];
    while (todo.length) {
      const [el, d] = todo.pop();
      if (d > max) { max = d; if (max > limit) return max; }
      for (let c = el.firstElementChild; c; c = c.nextElementSibling) todo.push([c, d + 1]);
    }
    return max;
  }
  function renderMath(el) {
    // One formula, or the reason it stays TeX source.
    const tex = el.textContent, L = MATH_LIMITS;
    if (tex.length > L.chars) return `longer than ${num(L.chars)} characters`;
    if (texNesting(tex) > L.nesting) return `nested deeper than ${L.nesting}`;
    const box = document.createElement("span");  // detached: never laid out unless kept
    try {
      window.katex.render(tex, box, { ...KATEX, displayMode: el.classList.contains("display") });
    } catch (err) {  // a stack overflow on deep input, say
      return "KaTeX failed (" + String(err && err.message || err).slice(0, 80) + ")";
    }
    if (domDepth(box, L.dom) > L.dom) return `more than ${L.dom} levels deep once laid out`;
    el.replaceChildren(...box.childNodes);
    return null;
  }
  const skippedIn = new WeakMap();  // text block -> Map(reason -> count), for its note
  function skip(el, why) {
    el.classList.add("tex-source");
    el.title = "shown as TeX source: " + why;
    const host = el.closest(".fold-part, .text, .box") || el.parentElement;
    const counts = skippedIn.get(host) || new Map();
    skippedIn.set(host, counts);
    counts.set(why, (counts.get(why) || 0) + 1);
    const n = [...counts.values()].reduce((p, q) => p + q, 0);
    let note = host.querySelector(":scope > p.note");
    if (!note) { note = document.createElement("p"); note.className = "note"; host.prepend(note); }
    note.textContent = `${num(n)} formula${n > 1 ? "s are" : " is"} shown as TeX source, not rendered: ` +
      [...counts].map(([w, c]) => `${w} (${num(c)})`).join("; ");
  }
  const nearScreen = new IntersectionObserver(entries => {
    for (const e of entries) if (e.isIntersecting) { nearScreen.unobserve(e.target); mathQueue.push(e.target); }
    pump(MATH_LIMITS.slice);
  }, { rootMargin: "200px 0px" });
  function pump(budget, count = Infinity) {
    // Render queued formulas for at most `budget` ms and `count` formulas; the rest wait
    // until they come near the screen.
    const end = performance.now() + budget;
    let done = 0;
    while (mathNext < mathQueue.length && done < count && performance.now() < end) {
      const el = mathQueue[mathNext++];
      done += 1;
      const why = renderMath(el);
      if (why) skip(el, why);
    }
    for (let i = mathNext; i < mathQueue.length; i++) nearScreen.observe(mathQueue[i]);
    mathQueue = []; mathNext = 0;
  }
  function math(root, budget = MATH_LIMITS.slice) {
    // Queue the formulas under root and render for at most `budget` ms now.
    if (!root) return;
    fill(root);
    if (!window.katex) return;
    for (const el of root.querySelectorAll(".math")) {
      if (el.dataset.done) continue;
      el.dataset.done = "1";
      mathQueue.push(el);
    }
    if (budget) pump(budget);
  }
  // A text of the payload: {t, s} (its index in the item's texts and the text, app.js), shown
  // rendered (markdown.js) when it is first shown, not before: a placeholder until then (a
  // closed "reasoning" costs nothing); {src: 1}: upstream text shown as the model got it, as
  // source; {fixed: n}: n lone surrogates the site could not carry, shown as U+FFFD. A text
  // longer than FOLD_CHARS is folded: its first block is laid out, each next one on request;
  // blocks past RENDER_CHARS are plain text, PLAIN_CHARS at a time, so a 10 MB reply is never
  // parsed whole. Cut as the build-time markup.py did (before issue 33): after the last
  // blank line of a block's second half, else after its last line break, else at the size.
  const FOLD_CHARS = 10000, RENDER_CHARS = 100000, PLAIN_CHARS = 100000;
  const folds = [];
  function cut(text, start, size, stop) {
    if (stop - start <= size) return stop;
    const low = start + Math.floor(size / 2), high = start + size;
    const half = text.slice(low, high);
    let at = half.lastIndexOf("\n\n");
    if (at >= 0) return low + at + 2;  // after the blank line
    at = half.lastIndexOf("\n");
    return at >= 0 ? low + at + 1 : high;
  }
  function nextBlock(f) {
    // [end, rendered] of the block after f.at: rendered within the first RENDER_CHARS (a
    // rendered block never ends past them but the first), plain after.
    const text = f.v.s, n = text.length;
    if (f.rendering) {
      const end = cut(text, f.at, FOLD_CHARS, Math.min(n, RENDER_CHARS + FOLD_CHARS));
      if (f.at === 0 || end <= RENDER_CHARS) return [end, true];
      f.rendering = false;
    }
    return [cut(text, f.at, PLAIN_CHARS, n), false];
  }
  function repaired(v) {
    return v.fixed ? `<p class="note">${num(v.fixed)} lone surrogate${v.fixed > 1 ? "s" : ""} (invalid UTF-16) shown as U+FFFD</p>` : "";
  }
  function textHtml(v) {
    if (v == null || v === "" || typeof v !== "object" || typeof v.s !== "string") return "";
    if (v.src) return repaired(v) + `<pre class="tex-source">${esc(v.s)}</pre>`;
    const id = folds.push({ v, at: 0, rendering: true, shown: false }) - 1;
    return repaired(v) + `<div class="fold" data-fold="${id}"></div>`;
  }
  function part(f) {
    // The next block of f as an element (not yet in the page).
    const [end, rendered] = nextBlock(f);
    const text = f.v.s.slice(f.at, end);
    f.at = end;
    const el = document.createElement(rendered ? "div" : "pre");
    el.className = rendered ? "fold-part" : "fold-part plain";
    if (rendered) el.innerHTML = RIMO_MARKDOWN.render(text); else el.textContent = text;
    return el;
  }
  function foldMore(id) {
    const f = folds[id], n = f.v.s.length;
    if (f.at >= n) return "";
    const [end, rendered] = nextBlock({ ...f });
    return `<span class="muted">characters 1–${num(f.at)} of ${num(n)} shown</span> · ` +
      `<button class="link" data-fold-next="${id}">show the next ${num(end - f.at)}${rendered ? "" : " (as plain text)"}</button>`;
  }
  function fill(root) {
    // Render the first block of each text under root that is shown (not in a closed details).
    for (const box of root.querySelectorAll(".fold[data-fold]")) {
      const f = folds[Number(box.dataset.fold)];
      if (!f || f.shown || box.closest("details:not([open])")) continue;
      f.shown = true;
      const first = part(f);  // always rendered; the blocks after it are .fold-part
      first.className = "fold-first";
      box.appendChild(first);
      const html = foldMore(Number(box.dataset.fold));
      if (!html) continue;
      const more = document.createElement("p");
      more.className = "fold-more";
      more.dataset.foldMore = box.dataset.fold;
      more.innerHTML = html;
      box.after(more);
    }
  }
  function unfold(id) {
    const f = folds[id];
    const box = document.querySelector(`.fold[data-fold="${id}"]`);
    if (!f || !box || f.at >= f.v.s.length) return;
    const el = part(f);
    box.appendChild(el);
    const more = document.querySelector(`[data-fold-more="${id}"]`);
    const html = foldMore(id);
    if (more) { if (html) more.innerHTML = html; else more.remove(); }
    math(el);
  }
  function reset() {
    // A new page: the formulas and folded texts of the last one are dropped.
    nearScreen.disconnect();
    mathQueue = []; mathNext = 0;
    folds.length = 0;
  }
  return {
    esc, num, literal, loadScript, math, textHtml, unfold, reset,
    // The first formulas of a page built detached, before it enters the document.
    mathFirst() { pump(MATH_LIMITS.first, MATH_LIMITS.count); },
  };
})();
