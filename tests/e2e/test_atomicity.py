"""Atomic artifacts: stages SIGKILLed at chosen and at random points never leave a torn file.

One temporary git + DVC repo (a copy of the session's ``oracle_run``: a full ``dvc repro`` with the
oracle) is shared by the module; its tests run in order and each leaves it consistent for the
next. Kill points are exact: with ``RIMO_EVAL_TEST_PAUSE_BEFORE_REPLACE`` set, stages.atomic
announces each publish on stderr and sleeps just before the rename, and the test SIGKILLs the
stage's process group at the k-th announcement. Random kills (seeded) land anywhere else,
including mid-write of a temporary file.

After every kill: each artifact is byte-identical to its previous version or a complete new
file (Parquet readable, JSON parses, ...), no temporary file sits where DVC would track it, and
``dvc status`` names exactly the stages that the file hashes (against dvc.lock) and params say
are changed, computed here independently.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import queue
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import nbformat
import pyarrow.parquet as pq
import pytest
import yaml

from rimo_eval.artifacts.paths import PARAMS_CHECK_PATH
from rimo_eval.io.atomic import PAUSE_ENV
from tests.support.pipeline_repo import copy_repo, env, sh

# Not `serial`: no outcome depends on timing. The exact kills wait for the stage's own
# announcement (it sleeps there), and a random kill may land anywhere, before the start or
# after the end included, where every artifact must be old or complete new all the same.
pytestmark = pytest.mark.slow

MARKER = "rimo-eval test hook: before replace "
IGNORED = ("__pycache__", ".pyc")  # .dvcignore
KILLS: list[str] = []  # every SIGKILL delivered to a running stage (the README figure)


# --- the repo and what DVC should say about it ------------------------------------------------


def stage_outs(repo: Path) -> dict[str, list[str]]:
    """Every output of every stage in dvc.yaml (outs, metrics, plots), as paths."""
    doc = yaml.safe_load((repo / "dvc.yaml").read_text(encoding="utf-8"))
    out: dict[str, list[str]] = {}
    for name, stage in doc["stages"].items():
        paths = []
        for key in ("outs", "metrics", "plots"):
            for entry in stage.get(key, []):
                paths.append(entry if isinstance(entry, str) else next(iter(entry)))
        out[name] = paths
    return out


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def listing(folder: Path) -> list[tuple[str, str]]:
    return sorted((p.relative_to(folder).as_posix(), md5(p)) for p in folder.rglob("*")
                  if p.is_file() and not any(part in IGNORED or part.endswith(".pyc")
                                             for part in p.parts))


def lookup(params: dict[str, Any], dotted: str) -> Any:
    value: Any = params
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            return KeyError
        value = value[key]
    return value


class Truth:
    """Which stages are changed, from dvc.lock, the files and params.yaml: DVC's rules, done by
    hand (file deps/outs by md5, folders against their listing when the lock was clean)."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.folders = self._folders()

    def _folders(self) -> dict[str, list[tuple[str, str]]]:
        lock = yaml.safe_load((self.repo / "dvc.lock").read_text(encoding="utf-8"))
        return {e["path"]: listing(self.repo / e["path"])
                for st in lock["stages"].values()
                for e in [*st.get("deps", []), *st.get("outs", [])] if e["md5"].endswith(".dir")}

    def changed(self) -> set[str]:
        lock = yaml.safe_load((self.repo / "dvc.lock").read_text(encoding="utf-8"))
        params = yaml.safe_load((self.repo / "params.yaml").read_text(encoding="utf-8"))
        out = set()
        for name, st in lock["stages"].items():
            for e in [*st.get("deps", []), *st.get("outs", [])]:
                path = self.repo / e["path"]
                if e["md5"].endswith(".dir"):
                    same = path.is_dir() and listing(path) == self.folders[e["path"]]
                else:
                    same = path.is_file() and md5(path) == e["md5"]
                if not same:
                    out.add(name)
            for values in (st.get("params") or {}).values():
                if any(lookup(params, k) != v for k, v in values.items()):
                    out.add(name)
        return out


def dvc_status(repo: Path) -> set[str]:
    proc = sh(repo, "dvc", "status", "--json")
    return set(json.loads(proc.stdout or "{}"))


def assert_status_truthful(repo: Path, truth: Truth, expected: set[str] | None = None) -> None:
    want = truth.changed()
    if expected is not None:
        assert want == expected, (want, expected)  # the scenario is what the test thinks
    assert dvc_status(repo) == want


def set_params(repo: Path, **changes: Any) -> None:
    """``set_params(repo, **{"score.bootstrap.samples": 200})``."""
    path = repo / "params.yaml"
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = params
        for key in parents:
            node = node[key]
        node[last] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")


# --- artifacts -------------------------------------------------------------------------------


def read(repo: Path, rels: list[str]) -> dict[str, bytes | None]:
    return {r: (repo / r).read_bytes() if (repo / r).is_file() else None for r in rels}


def assert_complete(path: Path) -> None:
    """A whole artifact of its kind, not a prefix of one."""
    data = path.read_bytes()
    if path.suffix == ".parquet":
        assert pq.read_table(path).num_rows > 0, path
    elif path.suffix == ".json":
        json.loads(data)
    elif path.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
        assert len(rows) >= 2 and all(len(r) == len(rows[0]) for r in rows), path
        assert data.endswith(b"\n"), path
    elif path.suffix == ".ipynb":
        nbformat.validate(nbformat.reads(data.decode("utf-8"), as_version=4))
    elif path.suffix == ".html":
        assert data.decode("utf-8").rstrip().endswith("</html>"), path
    else:
        raise AssertionError(f"no completeness check for {path}")


def temporaries(repo: Path) -> list[Path]:
    return sorted(p for p in repo.rglob(".*.tmp")
                  if not {".git", ".dvc"} & set(p.relative_to(repo).parts))


def assert_temporaries_harmless(repo: Path, outs: dict[str, list[str]]) -> None:
    """A killed run may leave its hidden temporary beside its target, never inside a folder
    that DVC tracks as a whole (data/raw) and never under an output's own name."""
    folders = [repo / p for ps in outs.values() for p in ps if (repo / p).is_dir()]
    targets = {repo / p for ps in outs.values() for p in ps}
    for tmp in temporaries(repo):
        assert not any(f in tmp.parents for f in folders), tmp
        assert tmp not in targets
        name = tmp.name.removeprefix(".").rsplit(".", 2)[0]
        assert tmp.parent / name in targets, tmp


# --- killing ---------------------------------------------------------------------------------


def _stage_env(pause: str | None) -> dict[str, str]:
    e = env()
    e.pop(PAUSE_ENV, None)
    if pause is not None:
        e[PAUSE_ENV] = pause
    return e


def _kill(proc: subprocess.Popen[str], what: str) -> None:
    assert proc.poll() is None, f"{what} ended before the kill"
    os.killpg(proc.pid, signal.SIGKILL)  # the stage and anything it started (DVC: its cmd)
    proc.wait(timeout=30)
    KILLS.append(what)


def kill_at(repo: Path, k: int, *cmd: str) -> list[str]:
    """Run ``cmd`` until it is about to publish its k-th artifact, SIGKILL it there, and return
    the targets of publishes 1..k (the last one never happened)."""
    proc = subprocess.Popen(cmd, cwd=repo, env=_stage_env(f"60@{k}"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    targets, log = [], []
    deadline = time.monotonic() + 60
    try:
        while len(targets) < k:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            if line is None:
                raise AssertionError(f"{cmd} exited after {len(targets)} publishes:\n"
                                     + "".join(log[-20:]))
            log.append(line)
            if line.startswith(MARKER):
                targets.append(line[len(MARKER):].strip())
        _kill(proc, f"{' '.join(cmd)} before publish {k} ({targets[-1]})")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return targets


def kill_after(repo: Path, delay: float, *cmd: str) -> bool:
    """SIGKILL ``cmd`` ``delay`` seconds after its start; False if it had already finished."""
    proc = subprocess.Popen(cmd, cwd=repo, env=_stage_env(None), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, text=True)
    time.sleep(delay)
    if proc.poll() is not None:
        assert proc.returncode == 0, cmd
        return False
    _kill(proc, f"{' '.join(cmd)} after {delay:.2f}s")
    return True


def timed(repo: Path, *cmd: str) -> float:
    start = time.monotonic()
    sh(repo, *cmd)
    return time.monotonic() - start


# --- the shared repo -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, oracle_run: Path) -> Path:
    repo = copy_repo(oracle_run, tmp_path_factory.mktemp("atomic") / "repo")
    assert dvc_status(repo) == set()
    return repo


@pytest.fixture(scope="module")
def truth(repo: Path) -> Truth:
    return Truth(repo)


@pytest.fixture(scope="module")
def outs(repo: Path) -> dict[str, list[str]]:
    return stage_outs(repo)


# --- the tests, in order -----------------------------------------------------------------------


def test_killed_score_leaves_each_artifact_old_or_complete_new(
        repo: Path, truth: Truth, outs: dict[str, list[str]]) -> None:
    """New predictions (a constant backend), then score killed before its 1st, 3rd and 5th
    publish and at random times; finally a complete run, then ``dvc repro score``."""
    assert truth.changed() == set()
    set_params(repo, **{"predict.backend": "constant"})
    sh(repo, "rimo-eval", "predict")
    score_outs = outs["score"]
    old = read(repo, score_outs)
    assert_status_truthful(repo, truth, {"check-params", "predict", "score", "judge",
                                          "view", "report"})

    published: dict[str, bytes] = {}  # the new version of each artifact, once seen
    for k in (1, 3, len(score_outs)):
        targets = kill_at(repo, k, "rimo-eval", "score")
        assert sorted(targets) == sorted(set(targets)) and set(targets) <= set(score_outs)
        now = read(repo, score_outs)
        for rel in score_outs:
            assert now[rel] is not None, rel
            assert_complete(repo / rel)
            if rel in targets[:-1]:  # renamed onto its target before the kill
                assert now[rel] != old[rel], rel
                assert published.setdefault(rel, now[rel]) == now[rel], rel  # deterministic
            else:
                assert now[rel] == old[rel], rel
        assert_temporaries_harmless(repo, outs)
        assert_status_truthful(repo, truth, {"check-params", "predict", "score", "judge",
                                          "view", "report"})

    # Random points: anywhere in the run, including inside a write. The old versions are put
    # back before each run, so every artifact must then be the old or the final one.
    full = timed(repo, "rimo-eval", "score")
    final = read(repo, score_outs)
    for delay in random.Random(0).sample([0.2 + full * i / 10 for i in range(10)], 3):
        for rel in score_outs:
            (repo / rel).write_bytes(old[rel] or b"")
        if kill_after(repo, delay, "rimo-eval", "score"):
            now = read(repo, score_outs)
            for rel in score_outs:
                assert now[rel] in (old[rel], final[rel]), rel
    sh(repo, "rimo-eval", "score")
    assert read(repo, score_outs) == final
    for rel in score_outs:
        assert_complete(repo / rel)
        assert final[rel] != old[rel], rel
        assert published.get(rel, final[rel]) == final[rel], rel
    assert temporaries(repo) == [], "a complete run removes what killed runs left"
    assert_status_truthful(repo, truth, {"check-params", "predict", "score", "judge",
                                          "view", "report"})

    sh(repo, "dvc", "repro", "score")
    assert read(repo, score_outs) == final  # DVC's run gives the bytes the direct run gave
    assert_status_truthful(repo, Truth(repo), {"judge", "view", "report"})


def test_killed_validate_and_report_keep_previous_artifacts(
        repo: Path, outs: dict[str, list[str]]) -> None:
    truth = Truth(repo)
    assert truth.changed() == {"judge", "view", "report"}
    old = read(repo, outs["validate"])
    targets = kill_at(repo, 2, "rimo-eval", "validate")
    assert targets == outs["validate"][:2]
    full = timed(repo, "rimo-eval", "validate")
    for delay in random.Random(1).sample([0.3 + full * i / 10 for i in range(10)], 3):
        kill_after(repo, delay, "rimo-eval", "validate")
        # Same inputs, same bytes: anything else is a torn or half-published file.
        assert read(repo, outs["validate"]) == old
    assert_temporaries_harmless(repo, outs)
    assert_status_truthful(repo, truth, {"judge", "view", "report"})
    sh(repo, "rimo-eval", "validate")  # the next complete run removes what the kills left
    assert read(repo, outs["validate"]) == old and temporaries(repo) == []

    set_params(repo, **{"report.worst_failures": 3})
    old = read(repo, outs["report"])
    targets = kill_at(repo, 2, "rimo-eval", "report")  # the notebook published, not the HTML
    assert targets == outs["report"]
    now = read(repo, outs["report"])
    for rel in outs["report"]:
        assert_complete(repo / rel)
    first, second = outs["report"]
    assert now[first] != old[first] and now[second] == old[second]
    if kill_after(repo, 1.5, "rimo-eval", "report"):  # inside the kernel run: nothing yet
        assert read(repo, outs["report"]) == now
    assert_temporaries_harmless(repo, outs)
    assert_status_truthful(repo, truth, {"check-params", "judge", "view", "report"})

    sh(repo, "dvc", "repro")
    assert_status_truthful(repo, Truth(repo), set())
    assert temporaries(repo) == []
    assert "Data and pipelines are up to date" in sh(repo, "dvc", "status").stdout


def test_killed_dvc_repro_is_reported_and_recovers(repo: Path,
                                                   outs: dict[str, list[str]]) -> None:
    """``dvc repro`` itself killed inside score: DVC removes a stage's outputs before running
    it, so they are missing (not torn); the lock stays as it was, status says so, and the next
    ``dvc repro`` restores everything."""
    truth = Truth(repo)
    assert truth.changed() == set()
    lock = (repo / "dvc.lock").read_bytes()
    set_params(repo, **{"score.bootstrap.samples": 200})

    def without_check(source: Path | bytes) -> dict[str, Any]:
        text = source.read_bytes() if isinstance(source, Path) else source
        stages = yaml.safe_load(text)["stages"]
        stages.pop("check-params")
        return stages

    old = read(repo, outs["score"])
    # check-params publishes its stamp first (the params file changed), then score its 1st
    # artifact; killed before score's 2nd.
    targets = kill_at(repo, 3, "dvc", "repro")
    assert targets[0] == PARAMS_CHECK_PATH.as_posix()
    targets = targets[1:]
    assert targets[0] == outs["score"][0]
    # check-params ran first and was recorded (a params file that changed); no other stage was.
    assert without_check(repo / "dvc.lock") == without_check(lock)
    now = read(repo, outs["score"])
    for rel in outs["score"]:
        assert now[rel] is None or now[rel] == old[rel] or rel in targets[:-1], rel
        if now[rel] is not None:
            assert_complete(repo / rel)
    assert_temporaries_harmless(repo, outs)
    # A stale DVC lock would make this fail with "is busy"; status must also be truthful.
    assert_status_truthful(repo, truth, {"score", "judge", "view", "report"})

    sh(repo, "dvc", "repro")
    assert_status_truthful(repo, Truth(repo), set())
    metrics = json.loads((repo / "reports/metrics.json").read_text(encoding="utf-8"))
    assert metrics["RIMO-N"]["n"] == 335 and metrics["RIMO-P"]["n"] == 454
    assert temporaries(repo) == []
