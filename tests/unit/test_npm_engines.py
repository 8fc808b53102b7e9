"""The front-end packages install on the Node.js the README names, with no EBADENGINE warning.

`make setup` runs `npm ci`; npm warns (and `engine-strict` refuses) when a package of the lock
declares an ``engines.node`` range the running Node does not satisfy: KaTeX 0.19.1's
commander@15.1.0 wanted Node >= 22.12 while Debian ships 18 (bookworm) and 20 (trixie). Each
range of package-lock.json is checked with npm's own semver (the module npm itself decides
with), against the oldest Node the README names and the Node of this machine.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# "Node.js 18 or later" in the README's prerequisites.
README_NODE = re.compile(r"Node\.js (\d+) or later")

CHECK = """
const semver = require(process.argv[1]);
const [lock, version] = [JSON.parse(require('fs').readFileSync(0, 'utf8')), process.argv[2]];
const bad = Object.entries(lock.packages)
  .filter(([, p]) => p.engines && p.engines.node)
  .filter(([, p]) => !semver.satisfies(version, p.engines.node))
  .map(([name, p]) => `${name}@${p.version} wants node ${p.engines.node}`);
console.log(JSON.stringify(bad));
"""


def npm_semver() -> Path:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.fail("node and npm are needed (README prerequisites; `make setup` runs npm ci)")
    root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, check=True)
    found = Path(root.stdout.strip()) / "npm/node_modules/semver"
    assert found.is_dir(), f"npm's semver module not found at {found}"
    return found


def unsupported(lock: str, version: str) -> list[str]:
    proc = subprocess.run(["node", "-e", CHECK, str(npm_semver()), version], input=lock,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def readme_node() -> int:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    found = README_NODE.search(readme)
    assert found, "README.md names no 'Node.js N or later' prerequisite"
    return int(found.group(1))


def test_readme_lists_node_and_npm_as_prerequisites() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    prerequisites = readme[readme.index("## Prerequisites"):readme.index("## Two commands")]
    assert README_NODE.search(prerequisites) and "npm" in prerequisites


def test_every_locked_package_supports_the_readme_node() -> None:
    lock = (REPO_ROOT / "package-lock.json").read_text(encoding="utf-8")
    current = subprocess.run(["node", "--version"], capture_output=True, text=True,
                             check=True).stdout.strip().lstrip("v")
    for version in (f"{readme_node()}.0.0", current):
        assert unsupported(lock, version) == [], version


def test_the_check_sees_an_engine_range_node_does_not_meet() -> None:
    """The check itself: the lock of KaTeX 0.19.1 with commander@15.1.0 fails it."""
    lock = json.dumps({"packages": {"node_modules/commander": {
        "version": "15.1.0", "engines": {"node": ">=22.12.0"}}}})
    assert unsupported(lock, "20.20.2") == ["node_modules/commander@15.1.0 wants node >=22.12.0"]
    assert unsupported(lock, "22.12.0") == []
