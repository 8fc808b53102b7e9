"""The run reader (rimo_eval.run): one model name for every tool, and one recovery message.

The model: real predict and score stages write a run into a temporary git + DVC repo's
workspace; the reader's record, the view's header, the summary, the report's run box and the
leaderboard's row all show reports/model.json's string (issue 41 §1: it was computed four
ways, and the report showed "—" where `dvc exp show` showed `constant '1'`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from rimo_eval.artifacts.model_name import PACKAGED_LOCAL, predictions_model
from rimo_eval.artifacts.paths import (
    ITEMS_DIR,
    METRICS_PATH,
    PLOTS_DIR,
    PREDICTIONS_DIR,
    SCORES_DIR,
    items_path,
    predictions_path,
)
from rimo_eval.commands.compare.revisions import load_side
from rimo_eval.commands.leaderboard.loading import from_record
from rimo_eval.commands.leaderboard.years import run_cutoff
from rimo_eval.commands.summary import summary
from rimo_eval.commands.view.header import header
from rimo_eval.commands.view.load import load_run
from rimo_eval.errors import ConfigError, DataError
from rimo_eval.params.config import (
    BootstrapParams,
    FetchParams,
    JudgeParams,
    PredictParams,
    ScoreParams,
)
from rimo_eval.predict import predict
from rimo_eval.report.selection import run_rows
from rimo_eval.rimo.tracks import TRACK_N, TRACKS
from rimo_eval.run.params import typed_section
from rimo_eval.run.reader import RunReader
from rimo_eval.run.recovery import advice
from rimo_eval.run.revision import WORKSPACE, Revision
from rimo_eval.score.stage import score
from tests.support.factories import predict_section, section, small_benchmark
from tests.support.pipeline_repo import sh

BOOT = section(ScoreParams, "score", bootstrap={"samples": 20, "seed": 0, "confidence": 0.95})
HERE = Revision(WORKSPACE, WORKSPACE, None)
EXP = Revision("exp-1", "experiment", "a" * 40, "refs/exps/aa/x/exp-1")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reader") / "repo"
    root.mkdir()
    sh(root, "git", "init", "-q", "-b", "main")
    sh(root, "dvc", "init", "-q")
    sh(root, "git", "commit", "-qm", "init")
    small_benchmark(root / ITEMS_DIR)
    replay = root / "runs/my model.jsonl"
    replay.parent.mkdir()
    replay.write_text(json.dumps({"track": TRACK_N, "problem_id": "2001a1",
                                  "prediction": "12"}) + "\n", encoding="utf-8")
    return root


def run_in(root: Path, cfg: dict[str, Any]) -> None:
    predict(predict_section(cfg), root / ITEMS_DIR, root / PREDICTIONS_DIR)
    score(BOOT, root / ITEMS_DIR, root / PREDICTIONS_DIR, root / SCORES_DIR,
          root / METRICS_PATH, root / PLOTS_DIR)


@pytest.mark.parametrize(("cfg", "want"), [
    ({"backend": "oracle"}, "oracle"),
    ({"backend": "constant", "constant": {"answer": "1", "solution": ""}}, "constant '1'"),
    ({"backend": "replay", "replay": {"path": "runs/my model.jsonl"}},
     "replay runs/my model.jsonl"),
])
def test_every_tool_shows_model_json(repo: Path, cfg: dict[str, Any], want: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)  # the replay path is relative, as in params.yaml
    run_in(repo, cfg)
    recorded = json.loads((repo / "reports/model.json").read_text(encoding="utf-8"))["model"]
    assert recorded == want
    with RunReader(repo) as reader:
        record = reader.open(WORKSPACE)
        assert (record.model, record.k) == (want, 1)
        view_run = load_run(reader, HERE)
        try:
            assert header(view_run)["model"] == want
        finally:
            view_run.close()
        assert from_record(record).model == want
        preds = {t: record.predictions(t) for t in TRACKS}
    assert dict(run_rows(record.metrics, preds))["model"] == want
    assert f", model {want}\n" in summary(repo)


@pytest.mark.parametrize(("backend", "section", "want"), [
    ("local", {"model_path": None, "n_ctx": 4096}, f"local {PACKAGED_LOCAL}"),
    ("openai", {"model": "Qwen/Qwen3-8B", "base_url": "http://127.0.0.1:1/v1"},
     "openai Qwen/Qwen3-8B"),
])
def test_model_backends_that_need_a_server_follow_the_same_rule(
        backend: str, section: dict[str, Any], want: str) -> None:
    """What a local or openai predictions table records (backend, backend_params as JSON) ->
    the string score writes to model.json and the reader shows."""
    frame = pd.DataFrame({"backend": [backend], "backend_params": [json.dumps(section)]})
    assert predictions_model([frame.iloc[:0], frame]) == want


def test_the_reader_falls_back_to_the_predictions_for_a_run_before_model_json(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    run_in(repo, {"backend": "constant", "constant": {"answer": "7", "solution": ""}})
    (repo / "reports/model.json").unlink()
    with RunReader(repo) as reader:
        assert reader.open(WORKSPACE).model == "constant '7'"
    assert (repo / predictions_path(TRACK_N)).is_file()


def test_the_workspace_with_every_needed_file_is_read_without_dvc(repo: Path) -> None:
    """The view stage reads the workspace run: with each table it needs on disk, nothing is
    absent, and opening DVC's Repo (a second of imports, the view stage's largest cost) was
    for nothing (issue 43, Performance)."""
    run_in(repo, {"backend": "constant", "constant": {"answer": "5", "solution": ""}})
    code = ("import sys\nfrom rimo_eval.commands.view.load import load_run\n"
            "from rimo_eval.run.reader import RunReader\n"
            "from rimo_eval.run.revision import WORKSPACE, Revision\n"
            f"with RunReader({str(repo)!r}) as reader:\n"
            "    run = load_run(reader, Revision(WORKSPACE, WORKSPACE, None))\n"
            "    print(run.model, 'dvc.repo' in sys.modules)\n    run.close()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=repo).stdout
    assert out == "constant '5' False\n"


def test_a_runs_params_are_typed_a_section_at_a_time_and_leniently(
        repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``Run.params`` is the revision's params.yaml as it stands (an older file is still read);
    ``Run.section`` types one section of it: None where the file leaves it out or holds what
    the model refuses now, never an error that hides the run (issue 41 item 5)."""
    monkeypatch.chdir(repo)
    run_in(repo, {"backend": "oracle"})
    older = {"predict": {"backend": "oracle", "limit": 5, "sample_seed": 3},
             "score": {"bootstrap": {"samples": 50}, "training_cutoff": 2019,
                       "alpha": 0.1},  # a key this version does not know
             "fetch": "gone"}
    (repo / "params.yaml").write_text(yaml.safe_dump(older), encoding="utf-8")
    try:
        with RunReader(repo) as reader:
            record = reader.open(WORKSPACE)
        assert record.params == older and record.params_error is None
        predict_cfg = record.section(PredictParams, "predict")
        assert isinstance(predict_cfg, PredictParams)
        assert (predict_cfg.backend, predict_cfg.limit, predict_cfg.sample_seed) == ("oracle", 5, 3)
        assert record.section(ScoreParams, "score") is None  # refused: 'alpha'
        with pytest.raises(ConfigError, match=r"score\.alpha"):
            typed_section(record.params, ScoreParams, "score")  # what view --partial shows
        with RunReader(repo) as reader:  # compare says it, as it takes the defaults
            side = load_side(reader.open(WORKSPACE))
        assert side.score is None and side.predict == predict_cfg
        [said] = [line for line in capsys.readouterr().err.splitlines()
                  if line.startswith("compare:")]  # one line: predict is read
        assert said.startswith("compare: workspace: its params.yaml score section is not read "
                               "here (params.yaml: score.alpha: unknown key)"), said
        boot = record.section(BootstrapParams, "score.bootstrap")
        assert boot is not None and boot.model_dump() == {"samples": 50, "seed": 0,
                                                          "confidence": 0.95}
        assert record.section(FetchParams, "fetch") is None  # not a mapping
        assert record.section(JudgeParams, "judge") is None  # not set
        # The tools take a run's own training cutoff through it (typed: 2019 is "2019").
        assert run_cutoff(from_record(record), {}) is None
        del older["score"]["alpha"]
        (repo / "params.yaml").write_text(yaml.safe_dump(older), encoding="utf-8")
        with RunReader(repo) as reader:
            record = reader.open(WORKSPACE)
        score_cfg = record.section(ScoreParams, "score")
        assert score_cfg is not None and score_cfg.model_dump() == {
            "bootstrap": boot.model_dump(), "pass_at": [1], "training_cutoff": "2019"}
        assert run_cutoff(from_record(record), {}) == "2019"
        assert run_cutoff(from_record(record), {WORKSPACE: "2021-06"}) == "2021-06"
    finally:
        (repo / "params.yaml").unlink()


# --- the one recovery message (issue 43 §3) ---------------------------------------------------


def remote(root: Path) -> Path:
    (root / ".dvc").mkdir(parents=True, exist_ok=True)
    (root / ".dvc/config").write_text("['remote \"store\"']\n    url = /tmp/store\n",
                                      encoding="utf-8")
    return root


def test_advice_in_the_workspace(tmp_path: Path) -> None:
    assert advice(tmp_path, HERE, True, []) == (
        "`dvc checkout` restores them from this clone's DVC cache")
    assert advice(tmp_path, HERE, False, ["a", "b"]).startswith(
        "`dvc exp apply NAME` puts an experiment's run in the workspace (a, b; see `dvc exp "
        "show`)")
    assert advice(tmp_path, HERE, False, []) == (
        "nothing has run in this clone yet: `make repro` (or `dvc repro`) runs the pipeline "
        "here")
    assert "dvc pull" not in advice(tmp_path, HERE, False, ["a"])
    assert advice(remote(tmp_path / "r"), HERE, False, ["a"]) == (
        "`dvc pull` brings them from the DVC remote")


def test_advice_for_another_revision(tmp_path: Path) -> None:
    text = advice(tmp_path, EXP, False, ["exp-1"])
    assert text.startswith("no DVC remote is configured (`dvc remote list`)")
    assert "rerun exp-1 here (`dvc exp run`)" in text and "pull" not in text
    with_remote = remote(tmp_path / "r")
    assert advice(with_remote, EXP, False, []) == (
        "`dvc exp pull <git-remote> exp-1` brings them (the experiment's `dvc pull`)")
    branch = Revision("main", "git", "b" * 40)
    assert advice(with_remote, branch, False, []) == (
        f"`dvc fetch --rev {'b' * 40}` brings them from the DVC remote")


def test_arrow_reads_a_runs_tables_from_paths_and_buffers_never_python_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table goes to Arrow as a file on disk (the workspace's, or the DVC cache's object of a
    commit's output) or as git's bytes in an Arrow buffer, never as a Python file object: Arrow
    released one from its thread pool while the interpreter finalized and `rimo-eval summary`
    aborted after its output (exit -6, 4 of 150 runs under load; rimo_eval.run.files)."""
    import pyarrow as pa

    root = tmp_path / "repo"
    root.mkdir()
    for args in (("git", "init", "-q", "-b", "main"), ("dvc", "init", "-q")):
        sh(root, *args)
    small_benchmark(root / ITEMS_DIR)
    monkeypatch.chdir(root)
    run_in(root, {"backend": "constant", "constant": {"answer": "3", "solution": ""}})
    sh(root, "dvc", "add", "-q", PREDICTIONS_DIR.as_posix())  # a folder: its manifest's entry
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-qm", "a run")
    want = {p(t): pd.read_parquet(root / p(t))
            for t in TRACKS for p in (items_path, predictions_path)}
    with RunReader(root) as reader:
        for revision in (HERE, reader.resolve("HEAD")):
            files = reader.files(revision)
            table = files.source(predictions_path(TRACK_N))
            assert isinstance(table, str) and Path(table).is_file()
            if revision.rev is not None:  # the cache's object, not the workspace's file
                assert Path(table).is_relative_to(root / ".dvc" / "cache")
            items = files.source(items_path(TRACK_N))
            assert isinstance(items, pa.BufferReader if revision.rev else str)
            for t in TRACKS:
                for p in (items_path, predictions_path):
                    pd.testing.assert_frame_equal(files.read_parquet(p(t)), want[p(t)])
            with pytest.raises(DataError, match=r"^data/nowhere\.parquet: not readable at"):
                files.source(Path("data/nowhere.parquet"))
    # An output of the commit that the local cache lacks: the same error, nothing half-read.
    with RunReader(root) as reader:
        files = reader.files(reader.resolve("HEAD"))
        Path(files.source(predictions_path(TRACK_N))).unlink()
        with pytest.raises(DataError, match=r"^data/predictions/rimo_n\.parquet: not readable "
                                            r"at .*\(not found\)$"):
            files.read_parquet(predictions_path(TRACK_N))
