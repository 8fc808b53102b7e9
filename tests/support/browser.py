"""Headless Debian Chromium for the browser tests (report, view, leaderboard, dvc plots).

Hermetic: no host name but localhost resolves, so a page that tried a CDN or any other remote
load would fail at once. ``RIMO_EVAL_NO_BROWSER=1`` skips the tests; without chromium,
chromedriver or selenium they fail, naming what to install.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SHORT_TMP = Path("/tmp")
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-default-apps", "--disable-extensions",
         "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost"]


@contextmanager
def chromium(width: int, height: int, spy: str | None = None,
             console_log: bool = False, request_log: bool = False) -> Iterator[Any]:
    """A WebDriver for a fresh profile. ``spy`` runs before any script of every page (the tests
    use it to record dialogs instead of opening them); ``console_log`` keeps the console;
    ``request_log`` keeps DevTools' network events (``requested_urls``)."""
    if os.environ.get("RIMO_EVAL_NO_BROWSER") == "1":
        pytest.skip("RIMO_EVAL_NO_BROWSER=1")
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(f"the browser test needs {', '.join(missing)}: apt-get install chromium "
                    "chromium-driver (or set RIMO_EVAL_NO_BROWSER=1 to skip it)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("the browser test needs selenium: pip install selenium==4.51.0")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    options.unhandled_prompt_behavior = "ignore"  # a dialog stays open, to be detected
    logs = {**({"browser": "ALL"} if console_log else {}),
            **({"performance": "ALL"} if request_log else {})}
    if logs:
        options.set_capability("goog:loggingPrefs", logs)
    # Chromium puts a unix socket in its profile and under TMPDIR; under a long TMPDIR (pytest's
    # tmp_path, as CI's) the path passes the 107-byte limit and Chromium exits at start.
    short = SHORT_TMP if SHORT_TMP.is_dir() else Path(tempfile.gettempdir())
    with tempfile.TemporaryDirectory(prefix="rimo-chr-", dir=short) as profile:
        for flag in [*FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}"]:
            options.add_argument(flag)
        service = Service(str(CHROMEDRIVER), env={**os.environ, "TMPDIR": str(short)})
        browser = webdriver.Chrome(service=service, options=options)
        try:
            if spy is not None:
                browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                                        {"source": spy})
            yield browser
        finally:
            browser.quit()


def renderer_alive(driver: Any) -> bool:
    """False once the page's renderer has crashed ("tab crashed": Chromium's sad tab); any
    other WebDriver error is raised."""
    from selenium.common.exceptions import WebDriverException

    try:
        return driver.execute_script("return 1") == 1
    except WebDriverException as exc:
        if "crashed" in str(exc).lower():
            return False
        raise


def requested_urls(driver: Any) -> list[str]:
    """Every URL the browser asked for since the last call (file:// and data: included, which
    the Resource Timing API leaves out), from a driver made with ``request_log=True``."""
    import json

    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls
