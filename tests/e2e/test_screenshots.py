"""docs/screenshots.py, the script that makes every image the docs show (issue 43): it knows
each image the pages reference, and a page it shoots is a real, 1,400 px wide picture.

Needs /usr/bin/chromium and /usr/bin/chromedriver (tests/support/browser.py);
RIMO_EVAL_NO_BROWSER=1 skips the shot.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from tests.support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "docs/screenshots.py"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")


def script(*args: str, timeout: float = 60) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def known() -> dict[str, str]:
    """Name -> width ('-' for a tool's own figure), as ``--list`` prints them."""
    return dict(line.split("\t")[:2] for line in script("--list").splitlines())


def referenced() -> set[str]:
    """Every PNG README.md and docs/*.md show, as a path under docs/."""
    found = set()
    for page in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for target in IMAGE.findall(page.read_text(encoding="utf-8")):
            path = (page.parent / target).resolve()
            found.add(path.relative_to(REPO_ROOT / "docs").as_posix())
    return found


def test_the_script_knows_every_image_the_docs_show_and_no_other() -> None:
    images = known()
    assert referenced() == set(images)
    for name in images:  # and each is committed, where the pages look for it
        assert (REPO_ROOT / "docs" / name).is_file(), name


@pytest.mark.slow
def test_a_page_shot_is_1400_px_wide_and_not_blank(tmp_path: Path) -> None:
    if os.environ.get("RIMO_EVAL_NO_BROWSER") == "1":
        pytest.skip("RIMO_EVAL_NO_BROWSER=1")
    # view.png: the cheapest page shot (a synthetic k = 16 run, no DVC experiment to make).
    assert known()["view.png"] == "1400"
    script("--only", "view.png", "--out", str(tmp_path), timeout=900)
    assert [p.name for p in tmp_path.iterdir()] == ["view.png"]  # that one only
    with Image.open(tmp_path / "view.png") as image:
        assert image.format == "PNG"
        width, height = image.size
        colours = image.convert("RGB").getcolors(1 << 16) or []
    assert width == 1400 and 300 < height <= 1900, image.size
    # The item, its answer histogram and a rendered reasoning: never one flat fill.
    assert len(colours) > 32, len(colours)
    by_share = sorted(colours, reverse=True)
    assert by_share[0][0] < 0.9 * width * height, by_share[:3]
