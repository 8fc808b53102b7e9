"""Missing DVC outputs are named (workspace and cache), and shared cache folders resolve to the
main working tree: a small real git + DVC repo, no pipeline run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rimo_eval.artifacts.missing import missing_outputs
from rimo_eval.chat.cache import DB_NAME, ResponseCache
from rimo_eval.errors import StageError
from rimo_eval.io.workspace import DVC_ROOT_ENV, project_root, shared_path
from rimo_eval.run.reader import RunReader
from rimo_eval.run.revision import WORKSPACE, Revision
from tests.support.pipeline_repo import sh


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A file and a folder added to DVC, and a stage with a ``cache: false`` output."""
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "git", "init", "-q", "-b", "main")
    sh(root, "dvc", "init", "-q")
    (root / "data/d").mkdir(parents=True)
    (root / "data/a.txt").write_text("a\n")
    (root / "data/d/x.txt").write_text("x\n")
    (root / "data/d/y.txt").write_text("y\n")
    sh(root, "dvc", "add", "-q", "data/a.txt", "data/d")
    sh(root, "dvc", "stage", "add", "-q", "-n", "note", "-O", "note.txt",
       "echo note > note.txt")
    sh(root, "dvc", "repro", "-q")
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-qm", "data")
    return root


def cache_object(root: Path, md5: str) -> Path:
    return root / ".dvc/cache/files/md5" / md5[:2] / md5[2:]


def dvc_md5(root: Path, rel: str) -> str:
    import yaml

    return yaml.safe_load((root / f"{rel}.dvc").read_text())["outs"][0]["md5"]


@pytest.mark.slow
def test_workspace_lists_absent_cached_outputs_only(repo: Path) -> None:
    assert missing_outputs(repo) == []
    (repo / "data/a.txt").unlink()
    shutil.rmtree(repo / "data/d")
    (repo / "note.txt").unlink()  # cache: false lives in git: not DVC's to bring back
    assert missing_outputs(repo) == ["data/a.txt", "data/d"]
    assert missing_outputs(repo, only=["data/d"]) == ["data/d"]
    with RunReader(repo) as reader, pytest.raises(StageError) as err:
        reader.require(Revision(WORKSPACE, WORKSPACE, None), ["data/a.txt", "data/d"])
    msg = str(err.value)
    # The cache still has them (only the workspace's copies are gone): `dvc checkout`.
    assert msg == ("2 DVC-tracked output(s) of workspace missing from the workspace: "
                   "data/a.txt, data/d. `dvc checkout` restores them from this clone's DVC "
                   "cache.")


@pytest.mark.slow
def test_revision_lists_outputs_absent_from_the_cache(repo: Path) -> None:
    sha = sh(repo, "git", "rev-parse", "HEAD").stdout.strip()
    dir_md5, a_md5 = dvc_md5(repo, "data/d"), dvc_md5(repo, "data/a.txt")
    shutil.rmtree(repo / "data")  # the workspace (.dvc files too) does not matter for a rev
    assert missing_outputs(repo, sha) == []
    # One file of the folder gone from the cache: the folder is incomplete.
    manifest = cache_object(repo, dir_md5).read_text()
    x_md5 = next(e["md5"] for e in json.loads(manifest)
                 if e["relpath"] == "x.txt")
    cache_object(repo, x_md5).unlink()
    assert missing_outputs(repo, sha) == ["data/d"]
    cache_object(repo, a_md5).unlink()
    assert missing_outputs(repo, sha) == ["data/a.txt", "data/d"]
    exp = Revision("exp-1", "experiment", sha, "refs/exps/x/exp-1")
    with RunReader(repo) as reader, pytest.raises(StageError) as err:
        reader.require(exp, ["data/a.txt", "data/d"])
    msg = str(err.value)
    assert (f"of exp-1 missing from the local DVC cache for exp-1 ({sha[:12]}): data/a.txt, "
            f"data/d") in msg
    # No DVC remote here: no `dvc pull` advice that would fail (issue 43 §3).
    assert "no DVC remote is configured" in msg and "pull" not in msg
    sh(repo, "dvc", "remote", "add", "-q", "store", str(repo.parent / "store"))
    with RunReader(repo) as reader:
        with pytest.raises(StageError, match=r"`dvc exp pull <git-remote> exp-1`"):
            reader.require(exp, ["data/d"])
        with pytest.raises(StageError, match=f"`dvc fetch --rev {sha}`"):
            reader.require(Revision("main", "git", sha), ["data/d"])


def test_shared_paths_resolve_against_dvc_root(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DVC_ROOT_ENV, raising=False)
    assert project_root() == Path(".") and shared_path("c/r") == Path("c/r")
    main = tmp_path / "main"
    main.mkdir()
    monkeypatch.setenv(DVC_ROOT_ENV, str(main))  # what DVC sets for queued and --temp runs
    assert shared_path(".rimo_cache/responses") == main / ".rimo_cache/responses"
    assert shared_path(tmp_path / "abs") == tmp_path / "abs"
    cache = ResponseCache(".rimo_cache/responses")
    cache.put("ab" * 32, {"q": 1}, {"texts": ["r"]})
    assert (main / ".rimo_cache/responses" / DB_NAME).is_file()
    assert ResponseCache(None).root is None
    monkeypatch.setenv(DVC_ROOT_ENV, str(tmp_path / "gone"))  # stale: fall back to the cwd
    assert shared_path("c") == Path("c")
