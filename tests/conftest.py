"""Shared fixtures: the real upstream mirror and scratch copies of it, the loopback fake chat
server, the fake API key, and the pipeline runs built once for the whole session (the project
validated, the oracle run, the view's two replay experiments)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.chat_server import ChatServer
from tests.support.fake_batch import FakeBatchServer
from tests.support.paths import UPSTREAM_FILES, find_mirror

# The fixtures built once per run (``built_once``): their first user builds, any other waits.
SHARED_BUILDS = ("oracle_run", "view_runs_base")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files in the order ``make test``'s parallel pass hands them out (``--dist loadfile
    --no-loadscope-reorder``), each file's tests in their order: first the first user of each
    shared build, so the two workers build them side by side at the start instead of one
    waiting for the other's; then the files with end-to-end tests (marked ``slow``), long
    ones of a few tests of up to 90 s; then the hundreds of quick unit tests, which even out
    the end. xdist's own order, by number of tests, left the long single-test files for last,
    where one worker ran them while the other had nothing left to take.
    """
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    builders = {next((path for path, tests in files.items()
                      if any(name in getattr(t, "fixturenames", ()) for t in tests)), None)
                for name in SHARED_BUILDS}
    slow = {path for path, tests in files.items() if any(t.get_closest_marker("slow")
                                                         for t in tests)}
    items.sort(key=lambda t: 0 if t.path in builders else 1 if t.path in slow else 2)  # stable


@pytest.fixture(scope="session")
def mirror_dir() -> Path:
    return find_mirror()


@pytest.fixture
def raw_dir(tmp_path: Path, mirror_dir: Path) -> Path:
    """A writable copy of the four upstream files, for tests that corrupt them."""
    out = tmp_path / "raw"
    out.mkdir()
    for name in UPSTREAM_FILES:
        shutil.copyfile(mirror_dir / name, out / name)
    return out


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[ChatServer]:
    """The loopback fake chat server (tests/support/chat_server.py), one per test. Its options
    come from the closest ``@pytest.mark.chat_server(...)`` (a module's ``pytestmark`` or the
    test's)."""
    marker = request.node.get_closest_marker("chat_server")
    srv = ChatServer(**(marker.kwargs if marker else {})).start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def _api_key(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """``@pytest.mark.api_key(ENV, SECRET)``: the test runs with ENV=SECRET set, a fake key that
    the tests then look for in every artifact, log and cache entry."""
    marker = request.node.get_closest_marker("api_key")
    if marker:
        env, secret = marker.args
        monkeypatch.setenv(env, secret)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], object]) -> Path:
    """The folder ``build(folder)`` filled, once per pytest run for all xdist workers.

    A file lock in the run's common temporary folder: the first worker builds, the others wait
    and reuse it. Read its files, but run no command in it (git and DVC write locks and state
    even to read) and change nothing: a test that does takes its own
    ``tests.support.pipeline_repo.copy_repo`` of the repo inside.
    """
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # each worker's basetemp sits in the run's shared folder
    top = base / name
    done = top.with_name(f"{name}.built")
    with FileLock(str(base / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(top, ignore_errors=True)  # debris of an attempt that failed
            top.mkdir()
            build(top)
            done.touch()
    return top


@pytest.fixture(scope="session")
def oracle_run(tmp_path_factory: pytest.TempPathFactory, mirror_dir: Path) -> Path:
    """The project after a full ``dvc repro`` with the oracle backend over every item, built
    once per pytest run (``built_once``: read it, copy it to change it)."""
    from tests.support.pipeline_repo import make_repo, sh  # here: it imports this module

    def build(top: Path) -> None:
        make_repo(top / "repo", mirror_dir)
        sh(top / "repo", "dvc", "repro")

    return built_once(tmp_path_factory, "oracle-run", build) / "repo"


@pytest.fixture(scope="session")
def validated_base(tmp_path_factory: pytest.TempPathFactory, mirror_dir: Path) -> Path:
    """The project after ``dvc repro validate`` (check-params, fetch, validate), built once per
    pytest run (``built_once``): fixtures take a ``tests.support.validated_repo.validated_copy``
    with their own predict section instead of fetching and validating again."""
    from tests.support.validated_repo import build_validated

    return built_once(tmp_path_factory, "validated",
                      lambda top: build_validated(top / "repo", mirror_dir)) / "repo"


@pytest.fixture(scope="session")
def view_runs_base(tmp_path_factory: pytest.TempPathFactory, validated_base: Path
                   ) -> dict[str, Any]:
    """``tests.support.view_runs.build_runs`` (experiments run-a and run-b over every item), built
    once per pytest run for the view's CLI and browser tests; each module takes its own copy
    (``tests.support.view_runs.copy_runs``), as both run commands in it."""
    from tests.support.view_runs import build_runs

    def build(top: Path) -> None:
        info = build_runs(top, validated_base)
        facts = {k: v for k, v in info.items() if k != "repo"}
        (top / "facts.json").write_text(json.dumps(facts), encoding="utf-8")

    top = built_once(tmp_path_factory, "view-runs", build)
    return {**json.loads((top / "facts.json").read_text(encoding="utf-8")), "repo": top / "repo"}


@pytest.fixture(name="fake")
def fake_batch_api() -> Iterator[FakeBatchServer]:
    """The batch tests' ``fake``: a fake OpenAI Batch API in front of a fake chat server (a
    module may define a ``fake`` of its own, as the provider tests do)."""
    chat = ChatServer().start()
    srv = FakeBatchServer(chat).start()
    yield srv
    srv.stop()
    chat.stop()
