"""The browser harness itself: Chromium must start whatever TMPDIR a test sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import chromium


def test_chromium_starts_under_a_long_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    # CI's pytest tmp_path plus Chromium's own socket folder passed the 107-byte limit of a unix
    # socket path: Chromium exited at start ("session not created"), failing view_build --quick.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(deep))
    with chromium(400, 300) as driver:
        driver.get("data:text/html,<title>started</title>")
        assert driver.title == "started"
