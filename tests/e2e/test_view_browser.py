"""``rimo-eval view`` in real headless Chromium: the site the CLI built from two real runs.

Grid, filters, search, URL state, side by side, flips, math rendered (counted as .katex
elements), and the hostile corpus (tests/support/view_runs.py) inert: no dialog, ``window.__pwned``
never set, no element with an event-handler attribute, no link, frame, object, form, style
element or foreign SVG, no navigation, and (served over loopback) no resource but the site's
own files. A control page with the payloads left raw proves the checks can fail.

Needs /usr/bin/chromium and /usr/bin/chromedriver; RIMO_EVAL_NO_BROWSER=1 skips.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rimo_eval.commands.view.model import build
from rimo_eval.commands.view.packing import decode, pack, text
from rimo_eval.commands.view.site import write_site
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.browser import chromium, renderer_alive
from tests.support.factories import n_item, p_item, write_items
from tests.support.pipeline_repo import env, sh
from tests.support.validated_repo import validated_copy
from tests.support.view_runs import (
    FUZZ,
    HOSTILE,
    HOSTILE_PROOF,
    HOSTILE_TEXT,
    MXSS,
    copy_runs,
    small_run,
)

SPY = """
window.__rimo_dialogs = [];
for (const name of ["alert", "confirm", "prompt", "print", "open"]) {
  window[name] = function (m) { window.__rimo_dialogs.push(name + ":" + m); };
}
// When each item page was first painted: the frame after it entered the document.
window.__rimo_painted = {};
new MutationObserver(() => {
  const item = document.getElementById("item");
  if (!item || item.dataset.key in window.__rimo_painted) return;
  const key = item.dataset.key;
  window.__rimo_painted[key] = null;
  const painted = () => { window.__rimo_painted[key] = performance.now(); };
  requestAnimationFrame(() => setTimeout(painted));
}).observe(document, { childList: true, subtree: true });
"""
# Everything a payload could have left behind in the DOM. KaTeX draws some glyphs (roots,
# arrows) as SVG of its own: an SVG outside .katex is foreign.
INJECTED = """
const hits = [], show = el => el.outerHTML.slice(0, 80);
for (const el of document.querySelectorAll("*"))
  for (const a of el.attributes) if (/^on/i.test(a.name)) hits.push("handler " + show(el));
const foreign = "iframe,object,embed,video,audio,img,form,base,meta[http-equiv=refresh],"
  + "link:not([href$='.css']),body style";
for (const el of document.querySelectorAll(foreign)) hits.push("element " + show(el));
for (const el of document.querySelectorAll("a")) hits.push("link " + show(el));
for (const el of document.querySelectorAll("svg"))
  if (!el.closest(".katex")) hits.push("svg " + show(el));
for (const el of document.querySelectorAll("#main [style]"))  // KaTeX's own, errors included
  if (!el.closest(".katex,.katex-error") && !el.matches(".strip,.bar"))
    hits.push("style " + show(el));
const own =
  /(katex\\.min|vendor\\/(markdown-it|purify|fzstd)\\.min|markdown|text|app|data\\/(index|items\\/\\d+|search\\/\\d+))\\.js$/;
for (const s of document.scripts)
  if (!own.test(s.src)) hits.push("script " + (s.src || s.textContent.slice(0, 60)));
if (getComputedStyle(document.body).display === "none") hits.push("body hidden by a payload's CSS");
return hits;
"""


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with chromium(1400, 1000, spy=SPY) as browser:
        yield browser


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, view_runs_base: dict[str, Any]
         ) -> dict[str, Any]:
    info = copy_runs(view_runs_base, tmp_path_factory.mktemp("view_browser"))
    sh(info["repo"], "rimo-eval", "view", "run-a", "run-b", "--out", "reports/view")
    info["site"] = info["repo"] / "reports/view"
    return info


def wait(driver: Any, script: str, timeout: float = 20, poll: float = 0.5) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=poll).until(
        lambda d: d.execute_script(script))


def open_site(driver: Any, site: Path | str, fragment: str = "") -> None:
    url = site if isinstance(site, str) else (site / "index.html").as_uri()
    driver.get("about:blank")
    driver.get(url + (f"#{fragment}" if fragment else ""))
    wait(driver, "return document.documentElement.dataset.ready === '1'")


def open_item(driver: Any, site: Path | str, key: str, extra: str = "") -> None:
    open_site(driver, site, f"item={key}{extra}")
    wait(driver, f"const i = document.getElementById('item'); return i && i.dataset.key === "
                 f"{json.dumps(key)}")


def shown_keys(driver: Any) -> list[str]:
    wait(driver, "return !!document.getElementById('grid')")
    return driver.execute_script(
        "return [...document.querySelectorAll('#grid tr.row')].map(r => r.dataset.key)")


def assert_inert(driver: Any) -> None:
    assert driver.execute_script("return window.__rimo_dialogs") == []
    assert driver.execute_script("return window.__pwned") is None
    assert driver.execute_script(INJECTED) == []


def test_control_page_trips_every_check(driver: Any, tmp_path: Path) -> None:
    """The payloads left raw in a page: the checks must see them, else the tests below prove
    nothing."""
    page = tmp_path / "control.html"
    page.write_text("<!doctype html><html><body><main id=main>" + "".join(HOSTILE)
                    + "</main></body></html>", encoding="utf-8")
    driver.get(page.as_uri())
    time.sleep(0.5)
    assert driver.execute_script("return window.__pwned") is not None
    hits = driver.execute_script(INJECTED)
    for kind in ("handler", "element", "link", "svg", "style", "script", "body hidden"):
        assert any(h.startswith(kind) for h in hits), (kind, hits)


@pytest.mark.slow
def test_grid_shows_every_item_and_run_with_counts_of_metrics(driver: Any, runs: dict[str, Any]
                                                               ) -> None:
    open_site(driver, runs["site"])
    keys = shown_keys(driver)
    assert len(keys) == 791 and keys[0].startswith("RIMO-N:") and keys[-1].startswith("RIMO-P:")
    cells = driver.execute_script("return document.querySelectorAll('#grid td.cell .c').length")
    assert cells == 2 * 791
    tiles = driver.execute_script(
        "return [...document.querySelectorAll('#overview .tile')].map(t => t.className)")
    assert len(tiles) == 2 * 791
    # Run A, RIMO-N: 12 hostile answers and 20 more wrong, one missing: as the tiles say.
    assert sum("o-W" in t for t in tiles[:335]) == 32 and sum("o-M" in t for t in tiles[:335]) == 1
    for i, name in enumerate(("run-a", "run-b")):
        text = driver.execute_script(
            f"return document.querySelector('.run[data-run=\"{i}\"]').innerText")
        assert name in text and "accuracy" in text and "[" in text  # headline with interval
    compare = json.loads(sh(runs["repo"], "rimo-eval", "compare", "run-a", "run-b",
                            "--json").stdout)
    rows = {m["name"]: (m["a"], m["b"]) for m in compare["metrics"]}
    counts = driver.execute_script(
        "return [...document.querySelectorAll('[data-count]')].map(e => e.textContent)")
    assert counts == [f"{rows['RIMO-N.correct'][0]} / {rows['RIMO-N.n'][0]}",
                      f"{round(rows['RIMO-P.strict'][0] * rows['RIMO-P.n'][0])} / "
                      f"{rows['RIMO-P.n'][0]}",
                      f"{rows['RIMO-N.correct'][1]} / {rows['RIMO-N.n'][1]}",
                      f"{round(rows['RIMO-P.strict'][1] * rows['RIMO-P.n'][1])} / "
                      f"{rows['RIMO-P.n'][1]}"]
    flips = driver.execute_script(
        "return [...document.querySelectorAll('[data-flips]')].map(e => +e.textContent)")
    assert flips == [len(compare["tracks"][t]["flips"]) for t in (TRACK_N, TRACK_P)]
    key = f"{TRACK_P}:{runs['ids_p'][7]}"
    driver.find_element("css selector", f"#overview .tile[data-key='{key}']").click()
    wait(driver, f"const i = document.getElementById('item'); return i && i.dataset.key === "
                 f"{json.dumps(key)}")
    open_site(driver, runs["site"])
    shot = runs["site"].parent / "view_grid.png"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 20_000


@pytest.mark.slow
def test_filters_search_and_url_state(driver: Any, runs: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    ids_n, ids_p = runs["ids_n"], runs["ids_p"]
    open_site(driver, runs["site"])
    Select(driver.find_element(By.CSS_SELECTOR, "select[data-key=track]")).select_by_value(
        TRACK_N)
    wait(driver, "return document.querySelectorAll('#grid tr.row').length === 335")
    Select(driver.find_element(By.CSS_SELECTOR, "select[data-key=outcome]")).select_by_value(
        "wrong")
    # Wrong in either run: A on 0-11 and 20-39, B on 30-49 (40 is missing in A, wrong in B).
    want = sorted({*ids_n[0:12], *ids_n[20:50]})
    wait(driver, f"return document.querySelectorAll('#grid tr.row').length === {len(want)}")
    assert shown_keys(driver) == [f"{TRACK_N}:{i}" for i in want]
    url = driver.current_url
    assert "track=RIMO-N" in url and "outcome=wrong" in url
    open_site(driver, url.split("#")[0], url.split("#")[1])  # a shared link: same view
    assert shown_keys(driver) == [f"{TRACK_N}:{i}" for i in want]

    # The runs shown live in the URL too: only B, whose wrong items are 30-49.
    driver.find_element(By.CSS_SELECTOR, "input[data-run-label=run-a]").click()
    wait(driver, "return location.hash.indexOf('runs=run-b') >= 0")
    wait(driver, "return document.querySelectorAll('#grid th').length === 4")
    assert shown_keys(driver) == [f"{TRACK_N}:{i}" for i in ids_n[30:50]]
    assert driver.execute_script("return document.querySelectorAll('#overview .tile').length") \
        == 20
    open_site(driver, runs["site"], "track=RIMO-N&outcome=missing")
    assert shown_keys(driver) == [f"{TRACK_N}:{ids_n[40]}"]
    open_site(driver, runs["site"], "disagree=1&track=RIMO-P")
    assert shown_keys(driver) == [f"{TRACK_P}:{i}" for i in [*ids_p[0:5], *ids_p[10:15]]]
    open_site(driver, runs["site"], "track=RIMO-P&parts=2&outcome=partial")
    assert shown_keys(driver) and all(k.split(":")[1] in ids_p[0:15]
                                      for k in shown_keys(driver))

    open_site(driver, runs["site"])
    box = driver.find_element(By.CSS_SELECTOR, "input[data-key=q]")
    box.send_keys("pwned\n")
    hostile = {f"{TRACK_N}:{i}" for i, h in zip(runs["hostile_n"], HOSTILE, strict=True)
               if "pwned" in h} | {f"{TRACK_P}:{runs['hostile_p']}"}
    wait(driver, f"return document.querySelectorAll('#grid tr.row').length === {len(hostile)}")
    assert set(shown_keys(driver)) == hostile
    assert "q=pwned" in driver.current_url
    # Search over the problem text too: every RIMO-N problem mentioning "triangle".
    open_site(driver, runs["site"], "q=triangle&track=RIMO-N")
    wait(driver, "return document.getElementById('shown').textContent.indexOf('loading') < 0")
    assert len(shown_keys(driver)) > 10
    assert_inert(driver)


@pytest.mark.slow
def test_fragment_opens_an_item_side_by_side_with_math(driver: Any, runs: dict[str, Any]
                                                        ) -> None:
    from selenium.webdriver.common.by import By

    pid = runs["ids_n"][25]  # wrong in A, right in B
    open_item(driver, runs["site"], f"{TRACK_N}:{pid}")
    cols = driver.find_elements(By.CSS_SELECTOR, "#item > .cols > .col")
    assert [c.get_attribute("data-run") for c in cols] == ["0", "1"]
    assert "wrong" in cols[0].text and "right" in cols[1].text
    assert driver.execute_script("return document.querySelectorAll('.problem .katex').length") > 0
    loaded = driver.execute_script("return RIMO.loaded()")
    assert loaded == {"items": [next(i for i, k in enumerate(
        [f"{TRACK_N}:{x}" for x in runs["ids_n"]]) if k == f"{TRACK_N}:{pid}")],
        "words": False}  # one item file, no search words: never every text at once
    # Swapped sides through the URL.
    open_item(driver, runs["site"], f"{TRACK_N}:{pid}", "&a=run-b&b=run-a")
    cols = driver.find_elements(By.CSS_SELECTOR, "#item > .cols > .col")
    assert [c.get_attribute("data-run") for c in cols] == ["1", "0"]
    # The arrow keys step through the filtered list; Escape goes back to the grid.
    from selenium.webdriver.common.keys import Keys

    open_item(driver, runs["site"], f"{TRACK_N}:{pid}", "&track=RIMO-N&outcome=wrong")
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    following = f"{TRACK_N}:{runs['ids_n'][26]}"
    wait(driver, f"const i = document.getElementById('item'); return i && i.dataset.key === "
                 f"{json.dumps(following)}")
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    wait(driver, "return !!document.getElementById('grid')")
    assert "outcome=wrong" in driver.current_url and "item=" not in driver.current_url
    # The flips list opens items.
    open_site(driver, runs["site"], "flips=1")
    driver.find_element(By.CSS_SELECTOR, f"#flips button[data-item='{TRACK_N}:{pid}']").click()
    wait(driver, f"return location.hash.indexOf('item={TRACK_N}:{pid}') >= 0")
    wait(driver, "return !!document.getElementById('item')")
    # RIMO-P part by part: sub-problem, reference, both proofs, matched or not.
    open_item(driver, runs["site"], f"{TRACK_P}:{runs['ids_p'][3]}")
    parts = driver.find_elements(By.CSS_SELECTOR, ".part")
    assert parts and all("reference sub-solution" in p.text for p in parts)
    assert "not matched" in parts[-1].text and parts[-1].text.count("matched") >= 2
    assert driver.execute_script("return document.querySelectorAll('.part .katex').length") > 5


@pytest.mark.slow
def test_hostile_corpus_is_inert_from_file(driver: Any, runs: dict[str, Any]) -> None:
    start = (runs["site"] / "index.html").as_uri()
    for key in [f"{TRACK_P}:{runs['hostile_p']}", *(f"{TRACK_N}:{i}" for i in runs["hostile_n"])]:
        open_item(driver, runs["site"], key)
        time.sleep(0.2)
        assert driver.current_url.startswith(start)
        assert_inert(driver)
    text = driver.execute_script("return document.body.innerText")
    assert HOSTILE[-1].split("<embed")[0] in text or "pwned" in text
    open_item(driver, runs["site"], f"{TRACK_P}:{runs['hostile_p']}")
    model = driver.execute_script(
        "return [...document.querySelectorAll('.model')].map(e => e.innerText).join('\\n')")
    assert "<script>window.__pwned = 1" in model and "{{ constructor" in model
    assert driver.execute_script("return document.querySelectorAll('.model .katex').length") >= 2
    shot = runs["site"].parent / "view_hostile.png"
    assert driver.save_screenshot(str(shot))


# What a rendered text may hold: the tags of markdown.js's allowlist, no attribute but the
# math classes. Checked on the parsed DOM, as the page would get it.
RENDERED = """
const [texts, raw] = arguments;
const out = [];
const allowed = new Set(["P", "BR", "HR", "EM", "STRONG", "CODE", "PRE", "BLOCKQUOTE", "UL", "OL",
  "LI", "H1", "H2", "H3", "H4", "H5", "H6", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD", "SPAN",
  "DIV", "S", "DEL"]);
for (const t of texts) {
  const html = raw ? RIMO_MARKDOWN.clean(t) : RIMO_MARKDOWN.render(t);
  const box = document.createElement("template");
  box.innerHTML = html;  // inert: a template's content never runs or loads
  for (const el of box.content.querySelectorAll("*")) {
    if (!allowed.has(el.tagName)) out.push("tag " + el.tagName + " of " + t.slice(0, 40));
    for (const a of el.attributes)
      if (a.name !== "class" || !/^math (inline|display)$/.test(a.value))
        out.push("attribute " + a.name + "=" + a.value + " of " + t.slice(0, 40));
  }
}
return out;
"""


@pytest.mark.slow
def test_in_page_renderer_is_as_inert_as_the_build_time_one_was(driver: Any,
                                                                runs: dict[str, Any]) -> None:
    """markdown.js (markdown-it, raw HTML off, then DOMPurify) gives what nh3 gave at build
    time: no tag off the allowlist, no attribute but the math classes, no URL; and DOMPurify
    alone, fed the payloads as raw HTML (should the parser ever let some through), strips them
    as well. Then every payload shown on an item page: no dialog, no element, no request."""
    open_site(driver, runs["site"])
    corpus = [*HOSTILE, *MXSS]
    assert driver.execute_script(RENDERED, corpus, False) == []
    assert driver.execute_script(RENDERED, corpus, True) == []
    html = driver.execute_script("return RIMO_MARKDOWN.render(arguments[0])",
                                 "Let $a_1 *b* c_2$ and \\[x_1 = y_2\\] be *so*; $$\\frac{1}{2}$$"
                                 "\n\n\\[\na\n\nb\n\\]\n\n\\(y\\) costs \\$5 and \\$6.")
    assert '<span class="math inline">a_1 *b* c_2</span>' in html
    assert '<span class="math display">x_1 = y_2</span>' in html
    assert "<em>so</em>" in html and '<span class="math display">\\frac{1}{2}</span>' in html
    assert '<div class="math display">a\n\nb</div>' in html  # a block, blank line and all
    assert '<span class="math inline">y</span>' in html and "$5 and $6" in html
    assert driver.execute_script("return RIMO_MARKDOWN.render(arguments[0])",
                                 "<b>bold</b> [x](javascript:alert(1))") == \
        "<p>&lt;b&gt;bold&lt;/b&gt; [x](javascript:alert(1))</p>\n"
    # The corpus on a page, through the site's own item files.
    start = (runs["site"] / "index.html").as_uri()
    for key in [f"{TRACK_P}:{runs['hostile_p']}", *(f"{TRACK_N}:{i}" for i in runs["hostile_n"])]:
        open_item(driver, runs["site"], key)
        driver.execute_script(  # every text rendered: reasoning and references too
            "for (const d of document.querySelectorAll('#main details')) d.open = true")
        time.sleep(0.2)
        assert not driver.find_elements("css selector", "#main .fold:empty")
        assert driver.current_url.startswith(start)
        assert_inert(driver)


TEX_HOSTILE = ["\\emph{<img src=x onerror=alert(1)>}", "\\textbf{<script>alert(2)</script>}",
               "\\emph{a \\textbf{[x](javascript:alert(3))}}", "\\emph{unclosed <b>x</b>"]


@pytest.mark.slow
def test_latex_text_styles_render_as_emphasis_and_stay_inert(driver: Any, runs: dict[str, Any]
                                                            ) -> None:
    """Upstream's problems write \\emph{...} (issue 43 showed it raw): \\emph, \\textit and
    \\textbf render as <em> and <strong> through the same inert path, math inside kept for
    KaTeX; markup inside stays text and unbalanced braces stay plain text."""
    open_site(driver, runs["site"])
    render = "return RIMO_MARKDOWN.render(arguments[0])"
    html = driver.execute_script(render, "Find \\emph{all} $n$, \\textbf{each} \\textit{odd "
                                         "$k_{1}$} one.")
    assert html == ('<p>Find <em>all</em> <span class="math inline">n</span>, <strong>each'
                    '</strong> <em>odd <span class="math inline">k_{1}</span></em> one.'
                    '</p>\n'), html
    assert driver.execute_script(RENDERED, TEX_HOSTILE, False) == []
    got = [driver.execute_script(render, t) for t in TEX_HOSTILE]
    assert got[0] == "<p><em>&lt;img src=x onerror=alert(1)&gt;</em></p>\n", got
    assert "<strong>&lt;script&gt;" in got[1] and "<em>a <strong>" in got[2], got
    assert got[3].startswith("<p>\\emph{unclosed &lt;b&gt;"), got


@pytest.mark.slow
def test_a_packed_text_round_trips_exactly_in_the_page(driver: Any, runs: dict[str, Any]
                                                       ) -> None:
    """What packing.py compresses, the page's decoder (fzstd) gives back character for
    character: NUL, C0/C1 and bidi controls, astral characters, 100,000 characters; a lone
    surrogate (which UTF-8 cannot carry) as U+FFFD, counted for the page's note."""
    values = ["NUL\x00 bell\x07 C1\x85 \u202eevil\u202c zero\u200bwidth \ufeff",
              "astral \U0001d49c \U0001f600 and math $\\mathbb{R}$", "lone \ud800 here",
              "x" * 100_000 + "\u00e9"]
    packed, blob = pack([text(v) for v in values])
    got = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "RIMO_MARKDOWN.unpack(arguments[0]).then(done, e => done('failed: ' + e));", blob)
    assert got == decode(blob) == [*values[:2], "lone \ufffd here", values[3]]
    assert packed[2] == {"t": 2, "fixed": 1} and "fixed" not in packed[0]


@pytest.mark.slow
def test_served_site_loads_only_its_own_files(driver: Any, runs: dict[str, Any]) -> None:
    """Over HTTP the browser records every resource it fetched (file:// records none)."""
    proc = subprocess.Popen(["rimo-eval", "view", "run-a", "run-b", "--out", "served",
                             "--serve", "--port", "0"], cwd=runs["repo"], env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("view: serving http://127.0.0.1:"), line
        # The browser resolves no host name but localhost (tests/support/browser.py), an IP literal
        # included.
        url = line.split()[2].replace("//127.0.0.1:", "//localhost:")
        origin = url.rsplit("/", 1)[0] + "/"
        for key in [f"{TRACK_P}:{runs['hostile_p']}", f"{TRACK_N}:{runs['hostile_n'][0]}"]:
            open_item(driver, url, key)
            time.sleep(0.3)
            assert_inert(driver)
        resources = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)")
        assert resources and all(r.startswith(origin) for r in resources), resources
        assert any("/data/items/" in r for r in resources)
        assert not any("/data/search/" in r for r in resources)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_k_samples_histogram_reasoning_and_model_text(driver: Any, tmp_path: Path) -> None:
    """k = 4 with model text, reasoning, usage and a cut-off reply, as a model backend records
    them (details), the text holding the hostile corpus."""
    items = tmp_path / "items"
    write_items(items, [n_item("2001a1", "12"), n_item("2001a2", "-3")],
                [p_item("2001g1", ["g1", "g2"])])
    answers = {"2001a1": ["12", "12", "13", "12"], "2001a2": ["5", "", "5", "-3"]}
    rows = [{"track": TRACK_N, "problem_id": pid, "sample": j, "prediction": a}
            for pid, preds in answers.items() for j, a in enumerate(preds)]
    rows += [{"track": TRACK_P, "problem_id": "2001g1", "sample": j,
              "prediction": ["g1", HOSTILE_PROOF if j == 0 else "g2"]} for j in range(4)]
    details = {(TRACK_N, "2001a1", j): {
        "text": f"Sample {j}: $\\frac{{a}}{{b}}$ " + HOSTILE_TEXT, "reasoning": "I think $y$",
        "finish_reason": "length" if j == 2 else "stop", "extraction": "boxed",
        "usage": {"completion_tokens": 100 + j, "prompt_tokens": 50}} for j in range(4)}
    run = small_run(tmp_path, "k4", items, rows, 4, details)
    # What the diag engineer's score stage adds (one flag per row), and a judge's verdicts.
    scores_n = run.scores[TRACK_N]
    scores_n["no_box"] = scores_n["prediction"].fillna("") == ""
    scores_n["lenient_match"] = False
    run.judge = pd.DataFrame([
        {"problem_id": "2001g1", "sample": 0, "part": 1, "verdict": "correct", "reason": "ok"},
        {"problem_id": "2001g1", "sample": 0, "part": 2, "verdict": "incorrect",
         "reason": "Step $2$ fails. " + HOSTILE_TEXT}])
    site = tmp_path / "site"
    write_site(site, *build([run]))
    open_site(driver, site, "flag=no_box")
    assert shown_keys(driver) == [f"{TRACK_N}:2001a2"]
    open_site(driver, site, "flag=lenient_match")
    assert shown_keys(driver) == []
    open_site(driver, site)
    strips = driver.execute_script(
        "return [...document.querySelectorAll('#grid .strip')].map(e => e.style.background)")
    assert len(strips) == 3 and all("linear-gradient" in s for s in strips)
    open_item(driver, site, f"{TRACK_N}:2001a1", "&s=2")
    hist = driver.execute_script(
        "return [...document.querySelectorAll('table.hist tr')].slice(1).map(r => r.innerText)")
    assert [h.split("\t")[:2] for h in hist] == [["12 = gold", "3"], ["13", "1"]]
    sample = driver.find_element("css selector", ".sample")
    assert sample.get_attribute("data-sample") == "2"
    assert "truncated" in sample.text  # the flag, read from the finish reason
    assert "finish reason length" in sample.text and "completion_tokens 102" in sample.text
    reasoning = driver.find_element("css selector", "details.reasoning")
    assert reasoning.get_attribute("open") is None  # collapsed
    assert "Sample 2:" in driver.find_element("css selector", ".model").text
    assert driver.execute_script("return document.querySelectorAll('.model .katex').length") >= 2
    assert_inert(driver)
    open_item(driver, site, f"{TRACK_N}:2001a2", "&s=1")
    assert "no_box" in driver.find_element("css selector", ".sample").text
    open_item(driver, site, f"{TRACK_P}:2001g1")
    assert_inert(driver)
    parts = driver.find_elements("css selector", ".part")
    assert "judge: correct" in parts[0].text and "judge: incorrect" in parts[1].text
    assert "<script>window.__pwned = 1" in parts[1].text
    assert len(driver.find_elements("css selector", "table.samples tr[data-s]")) == 4


# --- a model backend's run: the openai backend against the loopback fake chat server -------

REPLY = ("<think>" + HOSTILE_TEXT + " and $\\frac{1}{2}$</think>\n\nWe compute $x^2 + 1$.\n\n"
         + HOSTILE_TEXT + "\n\nSo the answer is $\\boxed{7}$.")


@pytest.fixture(scope="module")
def model_site(tmp_path_factory: pytest.TempPathFactory, validated_base: Path
               ) -> Iterator[Path]:
    """``dvc repro score`` with the openai backend (3 items per track) whose every reply holds
    the hostile corpus, in the content and in a think block, then ``rimo-eval view``."""
    from tests.support.chat_server import ChatServer

    server = ChatServer(responder=lambda body, prompt: REPLY).start()
    try:
        repo = validated_copy(validated_base, tmp_path_factory.mktemp("view_model") / "repo",
                              predict={"backend": "openai", "limit": 3, "openai": {
                                  "base_url": server.base_url, "model": "fake-model",
                                  "api_key_env": "RIMO_VIEW_TEST_NO_KEY", "max_retries": 0,
                                  "timeout_s": 30, "concurrency": 2}})
        sh(repo, "dvc", "repro", "score")
        assert server.ok_records()
    finally:
        server.stop()
    sh(repo, "rimo-eval", "view")
    yield repo / "reports/view"


@pytest.mark.slow
def test_model_replies_render_as_text_with_math_and_folded_reasoning(
        driver: Any, model_site: Path) -> None:
    from selenium.webdriver.common.by import By

    index = json.loads((model_site / "data/index.js").read_text()[len("RIMO.index("):-3])
    evaluated = [it["key"] for it in index["items"] if it["o"][0] != "-"]
    # The run's model as reports/model.json names it (the one reader).
    assert len(evaluated) == 6 and index["runs"][0]["model"] == "openai fake-model"
    for key in evaluated:
        open_item(driver, model_site, key)
        time.sleep(0.2)
        assert_inert(driver)
        model = driver.execute_script(
            "return [...document.querySelectorAll('.model')].map(e => e.innerText).join('')")
        assert "<script>window.__pwned = 1" in model and "{{ constructor" in model
        assert driver.execute_script("return document.querySelectorAll('.model .katex').length")
        folded = driver.find_elements(By.CSS_SELECTOR, "details.reasoning")
        assert folded and all(d.get_attribute("open") is None for d in folded)
        folded[0].find_element(By.TAG_NAME, "summary").click()  # unfold: math renders, inert
        wait(driver, "return document.querySelectorAll('details.reasoning[open] .katex').length")
        assert "<iframe" in folded[0].text
        assert_inert(driver)
        if key.startswith(TRACK_N):
            sample = driver.find_element(By.CSS_SELECTOR, ".sample").text
            assert "prediction: 7" in sample and "finish reason stop" in sample
            assert "completion_tokens" in sample and "extraction boxed" in sample


# --- the fuzz corpus: no model text crashes or hangs an item page (issue 28, section 4) -------

DOUBLED = "Let $S = \\\\sum_{k} k \\\\cdot p_n(k)$ over $\\{1, \\\\ldots, n\\}$."  # upstream's kind
PAGE_MS = 2000  # an item page, from navigation start to its math done and laid out


@pytest.fixture(scope="module")
def fuzz_site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One RIMO-N item per case of FUZZ, the case as the model's reply (the frac case with the
    sqrt case as its reasoning), scored by the real replay predict and score stages; a RIMO-P
    item whose sub-solution has upstream's doubled backslashes and whose proof is the arrays
    case."""
    root = tmp_path_factory.mktemp("view_fuzz")
    ids = {name: f"2001f{i:02d}" for i, name in enumerate(FUZZ)}
    items = root / "items"
    write_items(items, [n_item(pid, "12") for pid in ids.values()],
                [p_item("2001g1", [DOUBLED, "done"])])
    rows: list[dict[str, Any]] = [
        {"track": TRACK_N, "problem_id": pid,
         "prediction": "12\u200b" if name == "controls" else "12"} for name, pid in ids.items()]
    rows.append({"track": TRACK_P, "problem_id": "2001g1", "prediction": [FUZZ["arrays"], "x"]})
    details = {(TRACK_N, pid, 0): {"text": FUZZ[name], "finish_reason": "stop",
                                   **({"reasoning": FUZZ["sqrt"]} if name == "frac" else {})}
               for name, pid in ids.items()}
    run = small_run(root, "fuzz", items, rows, 1, details)
    scores = run.scores[TRACK_N]
    scores["lenient_match"] = scores["correct"]  # as score writes it: exact implies lenient
    site = root / "site"
    write_site(site, *build([run]))
    return {"site": site, "ids": ids}


# After the next frame: what the page showed has been laid out and painted.
PAINTED = ("const done = arguments[arguments.length - 1]; "
           "requestAnimationFrame(() => setTimeout(() => done(performance.now()), 0));")


def open_item_timed(driver: Any, site: Path, key: str) -> float:
    """Open an item page; ms from navigation start until it is rendered, math included, laid
    out and painted (SPY). Then scrolled to its end (where formulas render as they come
    near), the renderer must have survived."""
    driver.get("about:blank")
    driver.get((site / "index.html").as_uri() + f"#item={key}")
    painted = float(wait(driver, f"return window.__rimo_painted[{json.dumps(key)}]", poll=0.05))
    assert renderer_alive(driver), f"{key}: the tab crashed"
    driver.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    driver.execute_async_script(PAINTED)
    driver.execute_async_script(PAINTED)
    driver.get_screenshot_as_png()
    assert renderer_alive(driver), f"{key}: the tab crashed"
    return painted


@pytest.mark.slow
def test_fuzz_corpus_opens_fast_and_the_tab_survives(driver: Any, fuzz_site: dict[str, Any]
                                                     ) -> None:
    from selenium.webdriver.common.by import By

    site, ids = fuzz_site["site"], fuzz_site["ids"]
    times = {}
    for name, pid in ids.items():
        key = f"{TRACK_N}:{pid}"
        times[name] = open_item_timed(driver, site, key)
        assert_inert(driver)
        shown = driver.execute_script("return document.getElementById('item').innerText.length")
        assert shown < 150_000, (name, shown)  # folded: never the whole reply laid out
        if name in ("frac", "sqrt", "left", "braces", "sup", "arrays"):  # one fold block each
            why = driver.execute_script(
                "return [...document.querySelectorAll('.model .math.tex-source')]"
                ".map(e => e.title)")
            assert why, name  # left as TeX source, with the reason
            assert "shown as TeX source" in driver.find_element(By.CSS_SELECTOR,
                                                                ".model .note").text
    print("item pages, ms:", times)
    assert max(times.values()) < PAGE_MS, times

    # The deep reasoning, unfolded: its math is bounded too.
    open_item_timed(driver, site, f"{TRACK_N}:{ids['frac']}")
    driver.find_element(By.CSS_SELECTOR, "details.reasoning summary").click()
    wait(driver, "return document.querySelector('details.reasoning .note')")
    driver.get_screenshot_as_png()
    assert renderer_alive(driver)
    # A 10 MB reply: its first block, then the next ones on request: rendered up to 100,000
    # characters, then plain text (the item's texts hold it, compressed: never parsed whole).
    open_item_timed(driver, site, f"{TRACK_N}:{ids['reply_10mb']}")
    assert "of 10,000,000 shown" in driver.find_element(By.CSS_SELECTOR, ".fold-more").text
    for n in range(1, 20):  # 10 blocks and a short one make the first 100,000 characters
        driver.find_element(By.CSS_SELECTOR, "button[data-fold-next]").click()
        wait(driver, f"return document.querySelectorAll('.fold-part').length === {n}", poll=0.05)
        if driver.find_elements(By.CSS_SELECTOR, ".fold-part.plain"):
            break
    assert 10 <= n <= 12
    assert driver.execute_script("return document.querySelectorAll('.fold-part .katex').length")
    plain = driver.find_element(By.CSS_SELECTOR, ".fold-part.plain")
    assert plain.get_attribute("textContent").startswith("A paragraph with $x_i^2$ and **words**")
    assert "of 10,000,000 shown" in driver.find_element(By.CSS_SELECTOR, ".fold-more").text
    driver.get_screenshot_as_png()
    assert renderer_alive(driver)
    assert_inert(driver)
    # Invisible characters in a prediction are named: "12" + U+200B is not "12".
    open_item_timed(driver, site, f"{TRACK_N}:{ids['controls']}")
    assert driver.find_element(By.CSS_SELECTOR, ".sample .pred .cc").text == "U+200B"
    assert "wrong" in driver.find_element(By.CSS_SELECTOR, ".sample").text


@pytest.mark.slow
def test_upstream_text_is_shown_as_the_model_got_it_and_marked(driver: Any,
                                                               fuzz_site: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    site = fuzz_site["site"]
    open_site(driver, site, "data=text.double_backslash&outcome=all")
    assert shown_keys(driver) == [f"{TRACK_P}:2001g1"]
    open_item_timed(driver, site, f"{TRACK_P}:2001g1")
    note = driver.find_element(By.CSS_SELECTOR, ".dataq").text
    assert "sub-solution 1" in note and "doubled backslash" in note
    source = driver.find_element(By.CSS_SELECTOR, ".part .ref pre.tex-source").text
    assert source == DOUBLED  # as stored and sent, not rendered
    assert driver.execute_script("return document.querySelectorAll('.katex-error').length") == 0
    assert renderer_alive(driver)


@pytest.mark.slow
def test_diagnostic_flags_read_as_notes_not_warnings(driver: Any, fuzz_site: dict[str, Any]
                                                     ) -> None:
    """lenient_match on a right answer (exact implies lenient) is a grey note labelled
    diagnostic, not a yellow badge."""
    from selenium.webdriver.common.by import By

    open_item_timed(driver, fuzz_site["site"], f"{TRACK_N}:{fuzz_site['ids']['dollars']}")
    sample = driver.find_element(By.CSS_SELECTOR, ".sample")
    assert "right" in sample.text and "diagnostics: no_box lenient_match" in sample.text
    flag = sample.find_elements(By.CSS_SELECTOR, ".flag")[1]
    assert flag.text == "lenient_match"
    rgb = [int(x) for x in re.findall(r"\d+", flag.value_of_css_property("background-color"))[:3]]
    assert max(rgb) - min(rgb) <= 12, rgb  # a grey, not yellow
    assert "not the metric" in flag.get_attribute("title")


@pytest.mark.slow
def test_a_sample_run_lists_its_evaluated_items_and_steps_over_them_only(
        driver: Any, model_site: Path) -> None:
    """A sample of 3 + 3 items: the grid lists those 6 by default (not 785 "not evaluated"
    rows), and next/previous step through them only."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    open_site(driver, model_site)
    keys = shown_keys(driver)
    assert len(keys) == 6 and "6 of 791 items" in driver.find_element(By.ID, "shown").text
    outcome = Select(driver.find_element(By.CSS_SELECTOR, "select[data-key=outcome]"))
    assert outcome.first_selected_option.get_attribute("value") == "evaluated"
    open_item(driver, model_site, keys[0])
    assert not driver.find_elements(By.CSS_SELECTOR, "button[data-nav=prev]")
    for key in keys[1:]:
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
        wait(driver, f"const i = document.getElementById('item'); return i && i.dataset.key === "
                     f"{json.dumps(key)}")
    assert not driver.find_elements(By.CSS_SELECTOR, "button[data-nav=next]")
    open_site(driver, model_site, "outcome=all")
    assert len(shown_keys(driver)) == 791
    open_site(driver, model_site, "outcome=none")
    assert len(shown_keys(driver)) == 785


@pytest.mark.slow
def test_year_filter_shows_a_bands_items_with_breakdowns_counts_and_the_year(
        driver: Any, runs: dict[str, Any]) -> None:
    """Issue 32: the year filter. A band shows exactly the items whose id starts with one of
    its years, counted here from the items tables; its per-run counts are breakdown.json's
    by_year_band; ``--cutoff`` adds the unseen subset (year > the cutoff's year); an item page
    shows its year and shortlist label."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    repo = runs["repo"]
    site = repo / "reports/view-years"
    sh(repo, "rimo-eval", "view", "run-a", "run-b", "--cutoff", "run-b=2015-06",
       "--out", "reports/view-years")
    ids = {t: sorted(pd.read_parquet(repo / f"data/items/rimo_{t[-1].lower()}.parquet")
                     ["problem_id"]) for t in (TRACK_N, TRACK_P)}
    year = {t: {i: int(i[:4]) for i in ids[t]} for t in ids}
    refs = sh(repo, "git", "for-each-ref", "--format=%(refname)", "refs/exps").stdout.split()
    stored = [json.loads(sh(repo, "git", "show", f"{ref}:reports/breakdown.json").stdout)
              for name in ("run-a", "run-b") for ref in refs if ref.endswith(f"/{name}")]

    open_site(driver, site)
    Select(driver.find_element(By.CSS_SELECTOR, "select[data-key=year]")).select_by_value(
        "2015-2019")
    want = [f"{t}:{i}" for t in (TRACK_N, TRACK_P) for i in ids[t] if 2015 <= year[t][i] <= 2019]
    wait(driver, f"return document.querySelectorAll('#grid tr.row').length === {len(want)}")
    assert shown_keys(driver) == want and 0 < len(want) < 791
    assert "year=2015-2019" in driver.current_url
    counts = driver.execute_script("return Object.fromEntries([...document.querySelectorAll("
                                   "'[data-year-count]')].map(e => [e.dataset.yearCount, "
                                   "e.textContent]))")
    for i, breakdown in enumerate(stored):
        for track in (TRACK_N, TRACK_P):
            band = breakdown[track]["by_year_band"]["2015-2019"]
            assert counts[f"{i}:{track}"] == f"{band['right']} / {band['n']}"
    # The unseen subset of run-b's cutoff: years after 2015, the cutoff's own year seen.
    open_site(driver, site, "year=unseen-2015")
    want = [f"{t}:{i}" for t in (TRACK_N, TRACK_P) for i in ids[t] if year[t][i] > 2015]
    assert shown_keys(driver) == want
    option = driver.find_element(By.CSS_SELECTOR, "select[data-key=year] option:checked").text
    assert "2015-06" in option and "run-b" in option and "run-a" not in option
    assert "training cutoff 2015-06" in driver.find_element(
        By.CSS_SELECTOR, ".run[data-run='1']").text
    # An item page: its year, band and shortlist label (2005a3: A3), read from its id.
    pid = next(i for i in ids[TRACK_N] if re.fullmatch(r"\d{4}[acgn]\d+", i))
    open_item(driver, site, f"{TRACK_N}:{pid}")
    shown = driver.find_element(By.CSS_SELECTOR, "#item .year")
    assert shown.get_attribute("data-year") == pid[:4]
    assert f"shortlist {pid[4].upper()}{pid[5:]}" in shown.text and "band" in shown.text
    assert_inert(driver)
