"""The rendered report in a real browser: headless Chromium driven by Selenium.

tests/report/test_report.py checks the HTML as text; here a browser runs it. Model text carrying
``<script>``, event handlers, an iframe, SVG, a javascript: link, MathJax and Markdown must show
up as plain text: no dialog opens, no injected element exists in the DOM. Both charts must
render (decoded images with real pixels in their colours), and a screenshot of the page must be
a non-blank PNG. A control page with the same payload left unescaped proves each check can fail.

Needs /usr/bin/chromium and /usr/bin/chromedriver (Debian packages chromium, chromium-driver)
and selenium; without them the test fails, unless RIMO_EVAL_NO_BROWSER=1 is set (then skips).
The browser is kept off the network: every host name fails to resolve.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from matplotlib import image as mpimg

from rimo_eval.params.config import load_params
from rimo_eval.report import stage as R
from tests.support.browser import requested_urls
from tests.support.paths import REPO_ROOT
from tests.support.report_browser import (  # noqa: F401 - the fixture
    INJECTED,
    chromium_driver,
    load,
    open_dialog,
)
from tests.support.report_fixtures import XSS_TEXT, make_report_inputs

# Model text for a failing RIMO-P item, on top of the fixtures' RIMO-N XSS_TEXT.
PAYLOAD_P = ('</pre></td></tr></table><script>alert("p")</script>'
             '<iframe src="javascript:alert(4)"></iframe><svg onload="alert(5)"></svg>'
             '<b onmouseover="alert(6)">hover</b> [link](javascript:alert(7)) '
             "$\\href{javascript:alert(8)}{x}$ *emphasis* <!-- comment -->")
FAILING_P = "2022c5"  # prefix score 0: listed first among the RIMO-P parts side by side
# Problem text is untrusted too: this goes into the failing item's sub-problem and reference.
PAYLOAD_ITEM = ('<img src=x onerror="alert(9)"><a href="javascript:alert(10)">ref</a>'
                "<style>body{display:none}</style>{{7*7}}")

CHART_COLOURS = {  # rimo_eval/report/charts.py, years.py: headline, domain, parts, year bars
    0: [(0x48, 0x78, 0xA8), (0x9B, 0x9B, 0x9B), (0xE0, 0x82, 0x3D), (0x6A, 0xA8, 0x4F)],
    1: [(0x48, 0x78, 0xA8)],
    2: [(0x48, 0x78, 0xA8), (0xE0, 0x82, 0x3D), (0x6A, 0xA8, 0x4F)],
    3: [(0x48, 0x78, 0xA8), (0xE0, 0x82, 0x3D)],
}
ERROR_BAR_RGB = (0x22, 0x22, 0x22)  # charts.ERROR_BAR's colour


def _inject_payload(predictions_p: Path, items_p: Path) -> None:
    table = pq.read_table(predictions_p)
    rows = table.to_pylist()
    (row,) = [r for r in rows if r["problem_id"] == FAILING_P]
    # As the engine records a RIMO-P reply: per part (the report shows it part by part).
    row["details"] = json.dumps({"parts": [{"raw_text": PAYLOAD_P, "text": PAYLOAD_P}]},
                                sort_keys=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), predictions_p)
    table = pq.read_table(items_p)
    rows = table.to_pylist()
    (row,) = [r for r in rows if r["problem_id"] == FAILING_P]
    row["sub_problems"][0] = row["sub_solutions"][0] = PAYLOAD_ITEM
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), items_p)


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser_report")
    paths = make_report_inputs(root)
    _inject_payload(paths["predictions_p_path"], paths["items_p_path"])
    (root / "notebooks").mkdir()
    shutil.copyfile(REPO_ROOT / R.NOTEBOOK, root / R.NOTEBOOK)
    with contextlib.chdir(root):
        R.run(load_params())
    return root / R.OUT_HTML


def decode_png(data: bytes) -> np.ndarray:
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    pixels = mpimg.imread(io.BytesIO(data), format="png")
    return np.round(pixels[..., :3] * 255).astype(np.int32)  # RGB, 0..255


def colour_count(pixels: np.ndarray, rgb: tuple[int, int, int], tol: int = 6) -> int:
    return int((np.abs(pixels - np.array(rgb)).max(axis=-1) <= tol).sum())


def test_payload_survives_the_parquet_round_trip(report_html: Path) -> None:
    preds = pq.read_table(report_html.parents[1] / "data/predictions/rimo_p.parquet").to_pylist()
    (row,) = [r for r in preds if r["problem_id"] == FAILING_P]
    assert json.loads(row["details"])["parts"][0]["raw_text"] == PAYLOAD_P
    items = pq.read_table(report_html.parents[1] / "data/items/rimo_p.parquet").to_pylist()
    (item,) = [r for r in items if r["problem_id"] == FAILING_P]
    assert item["sub_solutions"][0] == item["sub_problems"][0] == PAYLOAD_ITEM


def test_control_page_trips_every_check(driver: Any, tmp_path: Path) -> None:
    """The same payloads left unescaped: the dialog spy and the DOM query must both see them
    (otherwise the report test below could pass without checking anything)."""
    page = tmp_path / "control.html"
    page.write_text(f"<!doctype html><html><body><pre>{XSS_TEXT}</pre><pre>{PAYLOAD_P}</pre>"
                    "<strong>bold</strong></body></html>", encoding="utf-8")
    load(driver, page)
    dialogs = driver.execute_script("return window.__rimo_dialogs")
    assert any(d.startswith("alert:") for d in dialogs), dialogs
    hits = driver.execute_script(INJECTED)
    assert any("onerror" in h for h in hits) and any("iframe" in h for h in hits), hits
    assert any(h.startswith("script:") for h in hits), hits


def test_report_in_chromium_escapes_model_text_and_renders_charts(
        driver: Any, report_html: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    load(driver, report_html)
    assert open_dialog(driver) is None
    assert driver.execute_script("return window.__rimo_dialogs") == []
    assert driver.execute_script(INJECTED) == []
    text = driver.execute_script("return document.body.innerText")
    assert XSS_TEXT in text and PAYLOAD_P in text  # shown verbatim, as text
    assert text.count(PAYLOAD_ITEM) == 2  # the sub-problem and the reference, as text
    assert driver.execute_script("return getComputedStyle(document.body).display") != "none"

    charts = driver.find_elements(By.CSS_SELECTOR, "img[src^='data:image/png']")
    assert len(charts) == 4  # headline, domains, parts, competition years
    for index, chart in enumerate(charts):
        size = driver.execute_script(
            "const i = arguments[0]; return [i.complete, i.naturalWidth, i.naturalHeight,"
            " i.getBoundingClientRect().width]", chart)
        assert size[0] is True and size[1] > 0 and size[2] > 0 and size[3] > 0, size
        driver.execute_script("arguments[0].scrollIntoView()", chart)
        pixels = decode_png(chart.screenshot_as_png)
        for rgb in CHART_COLOURS[index]:
            assert colour_count(pixels, rgb) > 200, (index, rgb)  # bars drawn, not an icon
        assert colour_count(pixels, ERROR_BAR_RGB, tol=20) > 40, index  # the error bars

    height = min(int(driver.execute_script("return document.body.scrollHeight")), 12000)
    driver.set_window_size(1280, height)
    shot = tmp_path / "report.png"
    assert driver.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert len(data) > 20_000
    pixels = decode_png(data)
    assert pixels.shape[0] >= 500 and pixels.shape[1] >= 1000, pixels.shape
    packed = (pixels[..., 0] << 16) | (pixels[..., 1] << 8) | pixels[..., 2]
    assert len(np.unique(packed)) > 50 and pixels.std() > 10  # text, tables, charts: not one colour
    assert colour_count(pixels, (0x48, 0x78, 0xA8)) > 400  # the charts are in the page itself
    assert open_dialog(driver) is None
    assert driver.execute_script("return window.__rimo_dialogs") == []


# Per table: the computed text-align of every cell under each header, and of a bare cell put
# into the same output area (what nbconvert's lab CSS does to a cell without our alignment).
ALIGNMENTS = """
const out = [];
for (const table of document.querySelectorAll("table.rimo")) {
  const heads = [...table.querySelectorAll("thead th")].map(th => th.textContent);
  const cols = {};
  for (const tr of table.querySelectorAll("tbody tr"))
    [...tr.children].forEach((td, i) => {
      (cols[heads[i]] = cols[heads[i]] || []).push(getComputedStyle(td).textAlign);
    });
  const probe = document.createElement("td");
  table.querySelector("tbody tr").appendChild(probe);
  cols["(bare cell)"] = [getComputedStyle(probe).textAlign];
  probe.remove();
  out.push(cols);
}
return out;
"""


def test_text_columns_are_left_aligned_in_chromium(driver: Any, report_html: Path) -> None:
    load(driver, report_html)
    tables = driver.execute_script(ALIGNMENTS)
    fail_n = next(t for t in tables if "flags" in t and "model text" in t)
    fail_p = next(t for t in tables if "reference sub-solution" in t)
    for table, columns in ((fail_n, ["problem_id", "problem", "prediction", "model text"]),
                           (fail_p, ["problem_id", "sub-problem", "reference sub-solution",
                                     "model's text"])):
        for column in columns:
            assert set(table[column]) == {"left"}, (column, table[column])
    assert set(fail_n["gold"]) == {"right"}
    parts = next(t for t in tables if "Prefix score" in t)
    assert set(parts["Prefix score"]) == {"right"} and set(parts["Parts"]) == {"right"}
    # Control: the page's own CSS right-aligns a cell that does not set its alignment, so the
    # checks above see the report's doing, not a browser default.
    assert all(t["(bare cell)"] == ["right"] for t in tables), tables


LINKS = """
return [...document.querySelectorAll("a[href]")].map(a => [a.getAttribute("href"), a.href]);
"""
NOWRAP = """
return [...document.querySelectorAll("td.rimo-nowrap")].map(td => [td.textContent,
  getComputedStyle(td).whiteSpace, td.getBoundingClientRect().height]);
"""


def test_links_lead_into_the_browser_and_gold_does_not_wrap(driver: Any,
                                                            report_html: Path) -> None:
    """Every link is the report's own: an anchor on the page or the view site beside it (none
    comes from model text), and a long gold integer stays on one line."""
    load(driver, report_html)
    site = (report_html.parent / "view" / "index.html").as_uri()
    links = driver.execute_script(LINKS)
    own = [resolved for raw, resolved in links if not raw.startswith("#")]
    assert own and all(r.split("#")[0] == site for r in own), own
    assert f"{site}#item=RIMO-P:{FAILING_P}" in own
    assert any(r.startswith(f"{site}#item=RIMO-N:") for r in own)
    cells = driver.execute_script(NOWRAP)
    assert cells and all(style == "nowrap" for _text, style, _h in cells), cells
    # One line high: no taller than the gold header cell's line in the same table.
    assert max(h for _t, _s, h in cells) < 60, cells


# Where a page may load from: itself and what it inlines. nbconvert's lab template loaded
# require.js and MathJax 2.7.7 from cdnjs (and mermaid when a diagram is there); offline that
# was 2 console errors and no math.
LOCAL = ("file://", "data:")
MATH = """
return [document.querySelectorAll(".jp-RenderedMarkdown .katex").length,
        document.querySelectorAll("table.rimo .katex, .rimo-run .katex").length,
        document.querySelectorAll("script[src], link[href^=http]").length,
        [...document.fonts].filter(f => f.family.startsWith("KaTeX") && f.status === "loaded")
          .length];
"""


def test_control_page_requests_are_logged(driver: Any, tmp_path: Path) -> None:
    """A page that loads a script from a CDN: the request log must show it (the browser
    resolves no host, so the request fails, but it was made)."""
    page = tmp_path / "cdn.html"
    page.write_text('<!doctype html><script src="https://cdnjs.cloudflare.com/x.js"></script>',
                    encoding="utf-8")
    requested_urls(driver)
    load(driver, page)
    urls = requested_urls(driver)
    assert page.as_uri() in urls and "https://cdnjs.cloudflare.com/x.js" in urls, urls


def test_report_makes_no_request_outside_its_file_and_renders_math(driver: Any,
                                                                   report_html: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    requested_urls(driver), driver.get_log("browser")  # only this page's from here on
    load(driver, report_html)
    urls = requested_urls(driver)
    assert report_html.as_uri() in urls
    assert all(u.startswith(LOCAL) for u in urls), [u for u in urls if not u.startswith(LOCAL)]
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.documentElement.dataset.mathReady"))
    in_prose, in_tables, remote, fonts = driver.execute_script(MATH)
    # The report's own formula (RIMO-P's prefix score) in KaTeX with its fonts, inlined;
    # model and upstream text in the tables stays text ($\href...$ of PAYLOAD_P included).
    assert in_prose >= 4 and in_tables == 0 and remote == 0 and fonts >= 1
    assert PAYLOAD_P in driver.execute_script("return document.body.innerText")


INLINE_CODE = """
return [...document.querySelectorAll('.jp-RenderedMarkdown :not(pre) > code')].map(c =>
  [c.textContent, getComputedStyle(c).whiteSpace, c.getClientRects().length]);
"""


def test_inline_code_stays_on_one_line(driver: Any, report_html: Path) -> None:
    """Inline code in the report's prose is never broken across lines (issue 43), at 1,400 px
    and in a narrow 700 px window where lab's CSS broke it mid-word."""
    try:
        for width in (1400, 700):
            driver.set_window_size(width, 1000)
            load(driver, report_html)
            codes = driver.execute_script(INLINE_CODE)
            assert codes, "the report's prose has inline code"
            assert all(ws == "nowrap" and lines == 1 for _t, ws, lines in codes), codes
    finally:
        driver.set_window_size(1280, 1000)
