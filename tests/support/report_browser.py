"""The report's browser harness: a headless Chromium that records dialogs, the script that finds
injected markup, and page loading."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import chromium

# Runs before any script of every page and frame: records dialogs instead of opening them.
SPY = """
window.__rimo_dialogs = [];
for (const name of ["alert", "confirm", "prompt", "print"]) {
  window[name] = function (message) { window.__rimo_dialogs.push(name + ":" + message); };
}
"""


INJECTED = """
const hits = [];
const selector = "[onerror],[onload],[onmouseover],[onclick],iframe,svg,img[src='x'],"
  + "a[href^='javascript:'],b";
for (const el of document.querySelectorAll(selector)) hits.push(el.outerHTML.slice(0, 120));
for (const s of document.querySelectorAll("script"))
  if (s.textContent.includes("alert(")) hits.push("script: " + s.textContent.slice(0, 80));
for (const el of document.querySelectorAll("strong,em"))
  if (/bold|emphasis/.test(el.textContent)) hits.push(el.outerHTML);
return hits;
"""


@pytest.fixture(scope="module", name="driver")
def chromium_driver() -> Iterator[Any]:
    with chromium(1280, 1000, spy=SPY, console_log=True, request_log=True) as browser:
        yield browser


def load(driver: Any, path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.as_uri())
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete")


def open_dialog(driver: Any) -> str | None:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return driver.switch_to.alert.text
    except NoAlertPresentException:
        return None
