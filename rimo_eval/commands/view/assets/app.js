// rimo-eval view: the transcript browser. Plain JavaScript, no framework, no template syntax.
// Every text from a run is rendered when shown (markdown.js: markdown-it + DOMPurify) or is
// plain text put in through esc(); text.js shows them within bounds (math, folds).
// The page's CSP lets nothing load but its own files.
"use strict";

const RIMO = (() => {
  // "evaluated" is the default: a sample run lists its sample, not 781 "not evaluated" rows.
  const OUTCOMES = {
    evaluated: "evaluated (the default)", all: "all items", right: "right", wrong: "wrong",
    truncated: "truncated (finish reason length)", partial: "RIMO-P: some parts right",
    missing: "missing", error: "error", ungradable: "ungradable", none: "not evaluated",
  };
  const DEFAULT_OUTCOME = "evaluated";
  const { esc, num, literal, loadScript, math, textHtml, unfold } = RIMO_TEXT;
  let index = null;
  const items = new Map();       // n -> payload, loaded one file at a time
  const waiting = new Map();     // n -> [resolve]
  let words = null;              // search words per item, after the first search
  const wordChunks = new Map();
  let lastShown = [];

  function pct(x) { return x == null ? "–" : (100 * x).toFixed(1) + "%"; }
  function $(id) { return document.getElementById(id); }

  // --- state in the URL fragment ------------------------------------------------------------
  function state() { return new URLSearchParams(location.hash.replace(/^#/, "")); }
  function go(changes) {
    const s = state();
    for (const [k, v] of Object.entries(changes)) {
      if (v === null || v === "" || v === undefined || v === false) s.delete(k); else s.set(k, v);
    }
    const next = "#" + s.toString().replace(/%3A/gi, ":").replace(/%2C/gi, ",");
    if (next !== location.hash) location.hash = next; else render();
  }
  function runIndex(label, fallback) {
    const i = index.runs.findIndex(r => r.label === label);
    return i >= 0 ? i : fallback;
  }
  function shownRuns(s) {
    // ?runs=a,b: the runs the grid shows (all by default); unknown labels are ignored.
    const want = (s.get("runs") || "").split(",").filter(Boolean);
    const idx = want.map(l => runIndex(l, -1)).filter(i => i >= 0);
    return idx.length ? [...new Set(idx)].sort((p, q) => p - q) : index.runs.map((_, i) => i);
  }
  function sides(s) {
    const n = index.runs.length;
    const a = runIndex(s.get("a"), 0);
    let b = runIndex(s.get("b"), n > 1 ? (a === 0 ? 1 : 0) : a);
    return [a, b];
  }

  // --- loading data as script files (fetch() of file:// is blocked) ------------------------
  function getItem(n) {
    if (items.has(n)) return Promise.resolve(items.get(n));
    return new Promise((resolve, reject) => {
      if (!waiting.has(n)) {
        waiting.set(n, []);
        loadScript("data/items/" + String(n).padStart(5, "0") + ".js").catch(reject);
      }
      waiting.get(n).push(resolve);
    });
  }
  async function getWords() {
    if (words) return words;
    const loads = [];
    for (let c = 0; c < index.search_chunks; c++)
      loads.push(loadScript("data/search/" + String(c).padStart(3, "0") + ".js"));
    await Promise.all(loads);
    while (wordChunks.size < index.search_chunks) await new Promise(r => setTimeout(r, 10));  // unpacking
    words = [];
    for (let c = 0; c < index.search_chunks; c++) words.push(...wordChunks.get(c));
    return words;
  }

  // --- outcomes -----------------------------------------------------------------------------
  function cls(code, parts) {
    if (/[0-9]/.test(code)) {
      const share = Number(code) / Math.max(parts, 1);
      return share === 0 ? "o-p0" : share < 0.5 ? "o-p1" : "o-p2";
    }
    return "o-" + code;
  }
  const COLOURS = { R: "#2e9e4f", S: "#2e9e4f", W: "#d64541", T: "#f39c12", M: "#b5b5b5",
                    E: "#8e44ad", U: "#e4e4e4", p0: "#d64541", p1: "#e98b5a", p2: "#b8c94a" };
  function colour(code, parts) { return COLOURS[cls(code, parts).slice(2)] || "#fff"; }
  function shareCode(codes, parts) {
    // k samples as one tile: all right, none right, or the share (RIMO-P's part colours).
    if ([...codes].every(c => c === "-")) return "-";
    const right = [...codes].filter(isRight).length;
    if (right === codes.length) return "R";
    if (right === 0) return [...codes].every(c => c === codes[0]) ? codes[0] : "W";
    return String(Math.max(1, Math.round(right / codes.length * Math.max(parts, 2) - 0.01)));
  }
  function isRight(code) { return code === "R" || code === "S"; }
  function matches(code, want, parts) {
    switch (want) {
      case "right": return isRight(code);
      case "wrong": return code === "W" || code === "T" || /[0-9]/.test(code);
      case "truncated": return code === "T";
      case "partial": return /[0-9]/.test(code) && Number(code) > 0 && Number(code) < parts;
      case "missing": return code === "M";
      case "error": return code === "E";
      case "ungradable": return code === "U";
      case "none": return code === "-";
      case "evaluated": return code !== "-";
      case "all": return true;
    }
    return true;
  }
  function stripStyle(codes, parts) {
    // One gradient per cell, k hard stops: no DOM node per sample, so k = 64 stays light.
    const k = codes.length, stops = [];
    let start = 0;
    for (let j = 1; j <= k; j++) {
      if (j === k || cls(codes[j], parts) !== cls(codes[start], parts)) {
        const c = colour(codes[start], parts);
        stops.push(c + " " + (100 * start / k).toFixed(3) + "% " + (100 * j / k).toFixed(3) + "%");
        start = j;
      }
    }
    return "linear-gradient(90deg, " + stops.join(", ") + ")";
  }

  // --- filters --------------------------------------------------------------------------------
  // Year: a fixed band (the item's band, computed at build time by rimo_eval/rimo/years.py, as
  // breakdown.json's by_year_band) or "unseen-YYYY": the items of years after a run's cutoff.
  function inYear(it, want) {
    if (want.startsWith("unseen-")) return it.y != null && it.y > Number(want.slice(7));
    return it.b === want;
  }
  function yearOptions() {
    const bands = (index.bands || []).map(b => [b, b]);
    const unseen = (index.unseen || []).map(u => [u.value, `unseen: after ${u.after} (cutoff ${u.cutoffs.join(", ")} of ${u.runs.join(", ")})`]);
    return [...bands, ...unseen];
  }
  function filtered(s) {
    const track = s.get("track"), domain = s.get("domain"), parts = s.get("parts"), year = s.get("year");
    const outcome = s.get("outcome") || DEFAULT_OUTCOME, flag = s.get("flag");
    const disagree = s.get("disagree"), data = s.get("data");
    const q = (s.get("q") || "").toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
    const shown = shownRuns(s);
    return index.items.filter(it => {
      const os = shown.map(i => it.o[i]), fs = shown.map(i => it.f[i]);
      if (track && it.track !== track) return false;
      if (domain && it.domain !== domain) return false;
      if (parts && String(it.parts) !== parts) return false;
      if (year && !inYear(it, year)) return false;
      if (outcome !== "all" && !os.some(o => [...o].some(c => matches(c, outcome, it.parts)))) return false;
      if (flag && !fs.some(f => f.includes(flag))) return false;
      if (data && !(it.w || []).includes(data)) return false;
      if (disagree) {
        const firsts = os.filter(o => o !== "-").map(o => isRight(o[0]));
        if (!(firsts.includes(true) && firsts.includes(false))) return false;
      }
      if (q.length) {
        if (!words) return false;
        const w = words[it.n];
        if (!q.every(t => w.includes(t))) return false;
      }
      return true;
    });
  }
  function select(name, label, options, value, all = true) {
    return `<label>${esc(label)} <select data-key="${name}">${all ? '<option value="">all</option>' : ""}` +
      options.map(([v, t]) => `<option value="${esc(v)}"${String(v) === value ? " selected" : ""}>${esc(t)}</option>`).join("") +
      "</select></label>";
  }
  function renderFilters(s) {
    const domains = [...new Set(index.items.map(i => i.domain).filter(Boolean))].sort();
    const parts = [...new Set(index.items.map(i => i.parts))].sort();
    const runs = index.runs.map((r, i) => [r.label, r.label]);
    const [a, b] = sides(s);
    let html = select("track", "track", [["RIMO-N", "RIMO-N"], ["RIMO-P", "RIMO-P"]], s.get("track") || "") +
      select("domain", "domain", domains.map(d => [d, d]), s.get("domain") || "") +
      select("parts", "parts", parts.map(p => [p, p]), s.get("parts") || "") +
      (index.bands ? select("year", "competition year", yearOptions(), s.get("year") || "") : "") +
      select("outcome", "outcome (any run, any sample)", Object.entries(OUTCOMES), s.get("outcome") || DEFAULT_OUTCOME, false) +
      select("flag", "diagnostic flag", index.flags.map(f => [f, f]), s.get("flag") || "") +
      (Object.keys(index.data_rules || {}).length ? select("data", "upstream text", Object.entries(index.data_rules), s.get("data") || "") : "") +
      `<label><input type="checkbox" data-key="disagree"${s.get("disagree") ? " checked" : ""}> runs disagree</label>` +
      `<label>search <input type="search" data-key="q" placeholder="${index.search_reasoning ? "words in problem, answers or reasoning" : "words in problem or answers (not reasoning)"}" title="${index.search_reasoning ? "" : "rimo-eval view --search-reasoning covers the reasoning too"}" value="${esc(s.get("q") || "")}"></label>`;
    if (index.runs.length > 1) {
      html += `<label>A <select data-key="a">${runs.map(([v]) => `<option${v === index.runs[a].label ? " selected" : ""}>${esc(v)}</option>`).join("")}</select></label>` +
        `<label>B <select data-key="b">${runs.map(([v]) => `<option${v === index.runs[b].label ? " selected" : ""}>${esc(v)}</option>`).join("")}</select></label>`;
    }
    if (index.runs.length > 1) {
      const shown = shownRuns(s);
      html += `<span class="runpick">runs shown: ${index.runs.map((r, i) => `<label><input type="checkbox" data-run-label="${esc(r.label)}"${shown.includes(i) ? " checked" : ""}> ${esc(r.label)}</label>`).join(" ")}</span>`;
    }
    const box = $("filters");
    box.innerHTML = html;
    for (const el of box.querySelectorAll("input[data-run-label]")) el.onchange = () => {
      const picked = [...box.querySelectorAll("input[data-run-label]:checked")].map(e => e.dataset.runLabel);
      go({ runs: picked.length === index.runs.length || !picked.length ? null : picked.join(",") });
    };
    for (const el of box.querySelectorAll("select")) el.onchange = () => go({ [el.dataset.key]: el.value });
    for (const el of box.querySelectorAll("input[type=checkbox][data-key]")) el.onchange = () => go({ [el.dataset.key]: el.checked ? "1" : null });
    for (const el of box.querySelectorAll("input[type=search]")) el.onchange = () => go({ q: el.value.trim() });
  }

  // --- run headers and flips ----------------------------------------------------------------
  function counted(i, list = index.items) {
    // Sample 0 of every evaluated item, counted from the grid's own codes.
    const c = { "RIMO-N": [0, 0], "RIMO-P": [0, 0] };
    for (const it of list) {
      const o = it.o[i];
      if (o === "-" || o[0] === "U") continue;
      c[it.track][1] += 1;
      if (isRight(o[0])) c[it.track][0] += 1;
    }
    return c;
  }
  function renderRuns() {
    $("runs").innerHTML = index.runs.map((r, i) => {
      const c = counted(i);
      const rows = [];
      for (const [track, t] of Object.entries(r.tracks)) {
        for (const m of t.metrics) {
          const ci = m.ci ? ` <span class="ci">[${pct(m.ci[0])}, ${pct(m.ci[1])}]</span>` : "";
          const diag = /diagnostic/.test(m.name) ? " diag" : "";
          rows.push(`<tr class="${diag}"><td>${esc(track)}</td><td>${esc(m.name)}</td><td class="v">${pct(m.value)}</td><td>${ci}</td></tr>`);
        }
        const diag = Object.entries(t.diagnostics || {});
        if (diag.length) rows.push(`<tr class="diag"><td>${esc(track)}</td><td colspan="3">diagnostic flags (score): ${diag.map(([f, c]) => esc(f) + " " + esc(c)).join(" · ")}</td></tr>`);
        const what = track === "RIMO-N" ? "right" : "strict";
        rows.push(`<tr><td>${esc(track)}</td><td>${what}, sample 0</td><td class="v" data-count="${esc(track)}">${c[track][0]} / ${c[track][1]}</td><td></td></tr>`);
      }
      const meta = [r.kind, r.rev ? r.rev.slice(0, 12) : "", r.model || r.backend, "k = " + r.k,
                    r.is_sample ? "SAMPLE of the items" : "all items",
                    r.cutoff ? "training cutoff " + r.cutoff : ""].filter(Boolean).join(" · ");
      return `<div class="run" data-run="${i}"><h2>${esc(r.label)}</h2><div class="meta">${esc(meta)}</div><table>${rows.join("")}</table></div>`;
    }).join("");
  }
  function partialBanner() {
    // rimo-eval view --partial: a run still in predict, read from its response cache. Its
    // counts are of the replies so far (pending samples are not evaluated), not metrics.json.
    for (const [i, r] of index.runs.entries()) {
      const p = r.partial, card = $("runs").querySelector(`.run[data-run="${i}"]`);
      if (!p || !card) continue;
      const note = document.createElement("p");
      note.className = "partial bad";
      note.dataset.partial = String(i);
      note.textContent = `partial: ${p.answered} of ${p.requests} requests answered, from the response cache at ${p.at}; ${p.samples_answered} of ${p.samples} samples whole, the rest pending. No metrics: the counts below are of the replies so far.`;
      card.insertBefore(note, card.querySelector(".meta").nextSibling);
      for (const cell of card.querySelectorAll("td.v[data-count]")) cell.previousElementSibling.textContent += " (partial, so far)";
    }
  }
  function renderFlips(s) {
    const box = $("flips");
    if (index.runs.length < 2) { box.innerHTML = ""; return; }
    const [a, b] = sides(s);
    const key = Math.min(a, b) + "-" + Math.max(a, b), flip = a > b;
    const pair = index.pairs[key];
    if (!pair) { box.innerHTML = ""; return; }
    const parts = [];
    for (const [track, t] of Object.entries(pair)) {
      if (t.k > 1) { parts.push(`<p>${esc(track)}: k = ${t.k}: flips are listed for k = 1 only, as in <code>rimo-eval compare</code>.</p>`); continue; }
      const lost = t.flips.filter(f => flip ? f.b : f.a).length, gained = t.flips.length - lost;
      parts.push(`<p><b>${esc(track)}</b> (${esc(t.metric)}, ${t.paired} paired): <span data-flips="${esc(track)}">${t.flips.length}</span> flips, right in A only ${lost}, right in B only ${gained}</p><ul>` +
        t.flips.map(f => {
          const inA = flip ? f.b : f.a;
          return `<li><button class="link" data-item="${esc(track + ":" + f.id)}">${esc(f.id)}</button> ${inA ? "A ✓ B ✗" : "A ✗ B ✓"}</li>`;
        }).join("") + "</ul>");
    }
    box.innerHTML = `<details${s.get("flips") ? " open" : ""}><summary>Flips between A = ${esc(index.runs[a].label)} and B = ${esc(index.runs[b].label)}</summary>${parts.join("")}</details>`;
    box.querySelector("details").ontoggle = e => { if (e.target.open !== !!state().get("flips")) go({ flips: e.target.open ? "1" : null }); };
    for (const el of box.querySelectorAll("button[data-item]")) el.onclick = () => go({ item: el.dataset.item });
  }

  function yearCounts(s, shown) {
    // The selected years' right / evaluated on sample 0 per run and track, whatever the other
    // filters: breakdown.json's by_year_band (or unseen) n and right for the same items.
    const year = s.get("year");
    if (!year) return "";
    const subset = index.items.filter(it => inYear(it, year));
    const rows = shown.map(i => {
      const c = counted(i, subset);
      return ["RIMO-N", "RIMO-P"].map(t => `${esc(index.runs[i].label)} · ${t} ${t === "RIMO-N" ? "right" : "strict"}: <span data-year-count="${i}:${t}">${c[t][0]} / ${c[t][1]}</span>`).join(" · ");
    });
    return `<p id="yearcounts" class="muted">competition year ${esc(year)}, sample 0 (a breakdown, not a metric): ${rows.join("; ")}</p>`;
  }

  // --- the grid -------------------------------------------------------------------------------
  function renderGrid(s) {
    const list = filtered(s);
    lastShown = list;
    const k = index.runs.map(r => r.k), shown = shownRuns(s);
    const head = `<tr><th>item</th><th>domain</th><th>parts</th>` +
      shown.map(i => `<th title="${esc(index.runs[i].label)}">${esc(index.runs[i].label)}${k[i] > 1 ? " (k = " + k[i] + ")" : ""}</th>`).join("") + "</tr>";
    const rows = list.map(it => `<tr class="row" data-key="${esc(it.key)}"><td>${esc(it.key)}</td><td>${esc(it.domain)}</td><td>${it.parts}</td>` +
      shown.map(i => [it.o[i], i]).map(([o, i]) => k[i] > 1 && o !== "-"
        ? `<td class="cell"><span class="strip" data-run="${i}"></span></td>`
        : `<td class="cell"><span class="c ${cls(o[0], it.parts)}" data-o="${esc(o[0])}"></span></td>`).join("") + "</tr>").join("");
    const legend = `<p class="legend">${[["R", "right"], ["W", "wrong"], ["T", "truncated"], ["p2", "≥ half right (RIMO-P parts; samples in a tile)"], ["p1", "some right"], ["M", "missing"], ["E", "error"], ["U", "ungradable"], ["-", "not evaluated"]].map(([c, t]) => `<span class="c o-${c}"></span> ${t}`).join(" &nbsp; ")}</p>`;
    // The overview, MathArena's way: one row of tiles per run and track, one tile per item
    // (the share of right samples when k > 1); the table below has every sample.
    const overview = shown.map(i => [index.runs[i], i]).map(([r, i]) => ["RIMO-N", "RIMO-P"].map(track => {
      const tiles = list.filter(it => it.track === track);
      if (!tiles.length) return "";
      return `<div class="ov"><span class="ovl" title="${esc(r.label)}">${esc(r.label)} · ${track}</span><div class="tiles">` + tiles.map(it => {
        const o = it.o[i];
        const code = o.length > 1 ? shareCode(o, it.parts) : o[0];
        return `<span class="tile ${cls(code, it.parts)}" data-key="${esc(it.key)}" title="${esc(it.key)}"></span>`;
      }).join("") + "</div></div>";
    }).join("")).join("");
    const hidden = !s.get("outcome") && list.length < index.items.length
      ? " (the evaluated ones: outcome “all items” lists every item)" : "";
    $("main").innerHTML = `<div id="overview">${overview}</div><p id="shown">${list.length} of ${index.items.length} items${hidden}${s.get("q") && !words ? " (loading the search words…)" : ""}</p>${yearCounts(s, shown)}${legend}<table class="grid" id="grid"><thead>${head}</thead><tbody>${rows}</tbody></table>`;
    // style attributes are blocked by the CSP: the strips get their colours through the CSSOM.
    const strips = $("main").querySelectorAll("span.strip");
    for (const el of strips) {
      const it = index.items[rowIndex(el)];
      el.style.background = stripStyle(it.o[Number(el.dataset.run)], it.parts);
      el.style.width = Math.max(28, 3 * it.o[Number(el.dataset.run)].length) + "px";
    }
    $("overview").onclick = e => { const t = e.target.closest(".tile"); if (t) go({ item: t.dataset.key }); };
    $("grid").onclick = e => { const tr = e.target.closest("tr.row"); if (tr) go({ item: tr.dataset.key }); };
    $("summary").textContent = `${index.runs.length} run(s) · ${index.items.length} items`;
  }
  const byKey = new Map();
  function rowIndex(el) { return byKey.get(el.closest("tr").dataset.key); }

  // --- the item page (its texts, math and folds: text.js) ------------------------------
  // Diagnostic flags (score): why an answer may be wrong, never the metric. They look like
  // notes, not warnings; lenient_match on a right answer only says exact implies lenient.
  const FLAG_HELP = {
    no_box: "the reply has no balanced \\boxed{...}", empty_box: "its last box is empty",
    multiple_boxes: "its boxes hold different values", truncated: "the reply was cut off (finish reason length)",
    gold_in_text: "the gold integer is in the text, but the prediction is wrong",
    lenient_match: "the prediction equals the gold after MathArena-style normalisation",
    unicode_repaired: "the reply held lone surrogates, each stored and graded as U+FFFD",
    redacted: "the API key was cut out of the reply, which can change what is graded",
    usage_dropped: "a usage counter of the server was no token count: left out of the token and cost totals",
  };
  function flags(fs) {
    return fs.length ? `<span class="diags">diagnostics: ${fs.map(f => `<span class="flag" title="diagnostic flag (score), not the metric: ${esc(FLAG_HELP[f] || f)}">${esc(f)}</span>`).join(" ")}</span>` : "";
  }
  function usage(u, finish, extraction) {
    const bits = Object.entries(u || {}).map(([k, v]) => `${esc(k)} ${v}`);
    if (finish) bits.push("finish reason " + esc(finish));
    if (extraction) bits.push("extraction " + esc(extraction));
    return bits.length ? `<div class="usage">${bits.join(" · ")}</div>` : "";
  }
  function histogram(samples, gold) {
    samples = samples.filter(x => x.status !== "pending");  // a partial view: no reply yet
    const counts = new Map();
    for (const x of samples) {
      const v = x.pred == null || x.pred === "" ? "(none)" : String(x.pred).trim();
      counts.set(v, (counts.get(v) || 0) + 1);
    }
    const rows = [...counts.entries()].sort((p, q) => q[1] - p[1] || (p[0] < q[0] ? -1 : 1));
    const max = rows.length ? rows[0][1] : 1;
    return `<table class="hist" data-distinct="${rows.length}"><tr><th>answer</th><th>samples</th><th></th></tr>` + rows.map(([v, c]) => {
      const right = v === String(gold).trim();
      return `<tr><td><span class="pred">${literal(v)}</span>${right ? ' <span class="ok">= gold</span>' : ""}</td><td>${c}</td><td><span class="bar${right ? " right" : ""}" data-w="${Math.round(160 * c / max)}"></span></td></tr>`;
    }).join("") + "</table>";
  }
  function verdict(x, track) {
    if (x.status === "error") return `<span class="bad">error</span>`;
    if (x.status === "missing") return `<span class="bad">missing</span>`;
    if (x.status === "pending") return `<span class="muted">pending (no reply in the response cache yet)</span>`;
    if (track === "RIMO-N") return x.ok ? `<span class="ok">right</span>` : `<span class="bad">wrong</span>`;
    return x.strict ? `<span class="ok">strict ✓</span>` : `<span class="bad">${x.n_matched} part(s) matched</span>`;
  }
  function sampleTable(samples, track, chosen) {
    return `<table class="samples"><tr><th>sample</th><th>${track === "RIMO-N" ? "prediction" : "parts"}</th><th>verdict</th><th>diagnostics</th></tr>` +
      samples.map(x => `<tr data-s="${x.s}"${x.s === chosen ? ' class="sel"' : ""}><td>${x.s}</td><td>${track === "RIMO-N" ? `<span class="pred">${literal(x.pred == null ? "(none)" : x.pred)}</span>` : x.parts.length}</td><td>${verdict(x, track)}</td><td>${flags(x.flags)}</td></tr>`).join("") + "</table>";
  }
  function column(p, i, chosen) {
    const r = index.runs[i], samples = p.runs[i];
    let html = `<div class="col" data-run="${i}"><h3>${esc(r.label)}</h3>`;
    if (!samples) return html + `<p class="muted">not evaluated in this run</p></div>`;
    if (samples.length > 1) {
      if (p.track === "RIMO-N") html += `<p><b>Distinct answers over ${samples.length} samples</b></p>` + histogram(samples, p.gold);
      html += sampleTable(samples, p.track, chosen);
    }
    const x = samples.find(y => y.s === chosen) || samples[0];
    html += `<div class="sample" data-sample="${x.s}"><p><b>sample ${x.s}</b>: ${verdict(x, p.track)} ${flags(x.flags)}</p>`;
    if (x.error) html += `<p class="bad">error: <span class="pred">${literal(x.error)}</span></p>`;
    if (p.track === "RIMO-N") {
      html += `<p>prediction: <span class="pred">${literal(x.pred == null ? "(none)" : x.pred)}</span></p>` + usage(x.usage, x.finish, x.extraction);
      if (x.reasoning) html += `<details class="reasoning"><summary>reasoning</summary><div class="text">${textHtml(x.reasoning)}</div></details>`;
      html += x.text ? `<div class="text box model">${textHtml(x.text)}</div>` : `<p class="muted">this backend kept no reply text: the prediction is all there is</p>`;
    } else {
      html += usage(x.usage, x.finish);
    }
    return html + "</div></div>";
  }
  function partsView(p, shown, chosen) {
    let html = "";
    const n = Math.max(p.parts, ...shown.map(i => Math.max(0, ...((p.runs[i] || []).map(x => x.parts.length)))));
    for (let j = 0; j < n; j++) {
      html += `<div class="part" data-part="${j + 1}"><h3>Part ${j + 1} of ${p.parts}</h3>` +
        `<div class="box">${textHtml(p.sub_problems[j]) || '<span class="muted">(no sub-problem)</span>'}</div>` +
        `<details open><summary>reference sub-solution</summary><div class="box ref">${textHtml(p.sub_solutions[j]) || '<span class="muted">(none)</span>'}</div></details>` +
        `<div class="cols n${shown.length}">` + shown.map(i => {
          const samples = p.runs[i];
          if (!samples) return `<div class="col"><p class="muted">not evaluated</p></div>`;
          const x = samples.find(y => y.s === chosen) || samples[0];
          const part = x.parts[j];
          if (!part) return `<div class="col"><p class="muted">no part ${j + 1}</p></div>`;
          const m = part.m === null ? '<span class="muted">not graded</span>' : part.m ? '<span class="ok">matched</span>' : '<span class="bad">not matched</span>';
          let judge = "";
          if (part.judge) judge = `<p>judge: <b>${esc(part.judge.verdict)}</b></p>${part.judge.reason ? `<div class="box">${textHtml(part.judge.reason)}</div>` : ""}`;
          return `<div class="col" data-run="${i}"><p><b>${esc(index.runs[i].label)}</b>, sample ${x.s}: ${m}${part.finish ? " · finish reason " + esc(part.finish) : ""}</p>${judge}` +
            (part.reasoning ? `<details class="reasoning"><summary>reasoning</summary><div class="text">${textHtml(part.reasoning)}</div></details>` : "") +
            (part.text ? `<div class="text box model">${textHtml(part.text)}</div>` : '<p class="muted">(no text)</p>') + "</div>";
        }).join("") + "</div></div>";
    }
    return html;
  }
  function dataNotes(p) {
    // Upstream text a check of validate flags (rimo_eval/rimo/text_quality.py): shown as the
    // model received it, as source, and said so.
    if (!p.data_warnings || !p.data_warnings.length) return "";
    return `<div class="dataq"><b>Upstream text, shown as the model received it.</b> ` +
      p.data_warnings.map(w => `${esc(w.fields.join(", "))}: ${esc(index.data_rules[w.rule] || w.rule)}`).join("; ") +
      `. These fields are shown as TeX source, not rendered: rimo-eval keeps upstream's text, as the paper's protocol does (README, “Upstream text as the model sees it”).</div>`;
  }
  function yearNote(p) {
    if (p.year == null) return "";
    return `<span class="year" data-year="${esc(p.year)}">${esc(p.year)} (band ${esc(p.band)})${p.shortlist ? " · shortlist " + esc(p.shortlist) : ""}</span> · `;
  }
  async function renderItem(s, key) {
    const meta = index.items[byKey.get(key)];
    if (!meta) { $("main").innerHTML = `<p class="bad">no item ${esc(key)} in these runs</p>`; return; }
    $("main").innerHTML = `<p>Loading ${esc(key)}…</p>`;
    const p = await getItem(meta.n);
    if (state().get("item") !== key) return;  // navigated away meanwhile
    const [a, b] = sides(s);
    const shown = index.runs.length > 1 && a !== b ? [a, b] : [a];
    const chosen = Number(s.get("s") || 0);
    const pos = lastShown.findIndex(it => it.key === key);
    const prev = pos > 0 ? lastShown[pos - 1].key : null, next = pos >= 0 && pos + 1 < lastShown.length ? lastShown[pos + 1].key : null;
    let html = `<div id="item" data-key="${esc(key)}"><p><button class="link" id="back" title="Escape">← grid</button>` +
      (prev ? ` · <button class="link" data-nav="prev" data-item="${esc(prev)}">← ${esc(prev)}</button>` : "") +
      (next ? ` · <button class="link" data-nav="next" data-item="${esc(next)}">${esc(next)} →</button>` : "") + "</p>" +
      `<h2>${esc(key)}</h2><p class="muted">${esc(p.domain || "no domain")} · ${yearNote(p)}${p.parts} part(s)${p.track === "RIMO-P" && !p.gradable ? " · ungradable: " + esc(p.ungradable_reason) : ""}</p>` +
      dataNotes(p) + `<h3>Problem</h3><div class="box problem">${textHtml(p.problem)}</div>`;
    if (p.track === "RIMO-N") {
      html += `<p>gold answer: <span class="pred gold" id="gold">${literal(p.gold)}</span></p>` +
        `<details><summary>reference solution</summary><div class="box ref">${textHtml(p.solution)}</div></details>`;
    }
    html += `<div class="cols n${shown.length}">` + shown.map(i => column(p, i, chosen)).join("") + "</div>";
    if (p.track === "RIMO-P") html += partsView(p, shown, chosen);
    html += "</div>";
    // Built and its math rendered while detached: nothing is laid out until it is complete.
    const page = document.createElement("div");
    page.innerHTML = html;
    math(page.querySelector(".problem"), 0);
    for (const el of page.querySelectorAll(".box, .text")) if (!el.closest("details:not([open])")) math(el, 0);
    RIMO_TEXT.mathFirst();
    const main = $("main");
    main.replaceChildren(...page.childNodes);
    for (const el of main.querySelectorAll(".bar")) el.style.width = el.dataset.w + "px";
    for (const el of main.querySelectorAll("table.samples tr[data-s]")) el.onclick = () => go({ s: el.dataset.s === "0" ? null : el.dataset.s });
    for (const el of main.querySelectorAll("button[data-item]")) el.onclick = () => go({ item: el.dataset.item, s: null });
    $("back").onclick = () => go({ item: null, s: null });
    main.onclick = e => { const b = e.target.closest("button[data-fold-next]"); if (b) unfold(Number(b.dataset.foldNext)); };
    for (const d of main.querySelectorAll("details")) d.addEventListener("toggle", () => math(d));
    window.scrollTo(0, 0);
  }

  // --- top level ------------------------------------------------------------------------------
  function render() {
    const s = state();
    RIMO_TEXT.reset();
    renderFilters(s);
    renderFlips(s);
    const key = s.get("item");
    document.body.classList.toggle("on-item", !!key);
    if (s.get("q") && !words) getWords().then(render);
    if (key) { lastShown = filtered(s); renderItem(s, key); } else renderGrid(s);
  }
  return {
    index(data) {
      index = data;
      index.items.forEach((it, i) => byKey.set(it.key, i));
      renderRuns();
      partialBanner();
      $("home").onclick = () => { location.hash = ""; };
      // On an item: left and right arrows step through the filtered list, Escape goes back.
      document.addEventListener("keydown", e => {
        if (!state().get("item") || /^(INPUT|SELECT|TEXTAREA)$/.test(e.target.tagName)) return;
        const to = { ArrowLeft: "prev", ArrowRight: "next" }[e.key];
        if (to) { const b = document.querySelector(`button[data-nav="${to}"]`); if (b) b.click(); }
        if (e.key === "Escape") go({ item: null, s: null });
      });
      window.addEventListener("hashchange", render);
      render();
      document.documentElement.dataset.ready = "1";
      // For benchmarks/view_build.py: milliseconds from navigation start to the grid in the DOM.
      document.documentElement.dataset.readyMs = String(Math.round(performance.now()));
    },
    async item(n, payload, blob) {
      // The item's texts come compressed, once (packing.py): each {t} gets its text as s.
      const texts = await RIMO_MARKDOWN.unpack(blob);
      const walk = v => {
        if (Array.isArray(v)) v.forEach(walk);
        else if (v && typeof v === "object") {
          if (typeof v.t === "number") v.s = texts[v.t];
          else Object.values(v).forEach(walk);
        }
      };
      walk(payload);
      items.set(n, payload);
      for (const resolve of waiting.get(n) || []) resolve(payload);
      waiting.delete(n);
    },
    async search(c, blob) { wordChunks.set(c, await RIMO_MARKDOWN.unpack(blob)); },
    loaded() { return { items: [...items.keys()], words: words !== null }; },
  };
})();
