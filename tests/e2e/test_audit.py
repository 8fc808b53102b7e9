"""``rimo-eval audit`` and the provenance block: every link checked, every break named."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from rimo_eval.artifacts.metrics_files import split
from rimo_eval.artifacts.predictions import PREDICTION_SCHEMAS
from rimo_eval.artifacts.provenance import build_provenance, git_state, params_fingerprint
from rimo_eval.commands.audit.command import (
    DvcHashes,
    Ledger,
    check_items,
    check_lock,
    check_metrics,
    check_scores,
    first_difference,
    recompute_metrics,
    upstream_stages,
)
from rimo_eval.commands.audit.command import audit as run_audit
from rimo_eval.errors import DataError
from rimo_eval.io.hashing import sha256_file
from rimo_eval.params.config import FetchParams, ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.stage import SCORE_FILES, score
from tests.support.factories import n_item, params, predict_section, small_benchmark, write_items
from tests.support.factories import section as typed_section
from tests.support.in_process import audit_cli
from tests.support.pipeline_repo import copy_repo, sh

BOOT = {"samples": 100, "seed": 0, "confidence": 0.95}
FETCH = {"repo": "o/r", "revision": "abc", "folder": "RIMO", "mirrors": ["/x"],
         "url_template": "u", "sha256": {"RIMO-N.jsonl": "AB" * 32}}


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """The real predict and score stages on small items, laid out like the repo."""
    small_benchmark(tmp_path / "data/items")
    replay = tmp_path / "r.jsonl"
    replay.write_text("".join(json.dumps({"track": t, "problem_id": i, "prediction": p}) + "\n"
                              for t, i, p in [(TRACK_N, "2001a1", "12"), (TRACK_N, "2001c1", "8"),
                                              (TRACK_P, "2001g1", ["g1", "x"])]))
    predict(predict_section(backend="replay", replay={"path": str(replay)}),
            tmp_path / "data/items", tmp_path / "data/predictions")
    run_params = params(fetch=FETCH, predict={"backend": "replay",
                                              "replay": {"path": str(replay)}})
    score(typed_section(ScoreParams, "score", bootstrap=BOOT), tmp_path / "data/items",
          tmp_path / "data/predictions", tmp_path / "data/scores",
          tmp_path / "reports/metrics.json", tmp_path / "reports/plots", params=run_params)
    return tmp_path


def frames(root: Path, kind: str) -> dict[str, pd.DataFrame]:
    return {t: pd.read_parquet(root / f"data/{kind}" / SCORE_FILES[t]) for t in TRACKS}


# --- the provenance block ----------------------------------------------------------------------


def test_provenance_block_names_inputs_pins_and_versions(small: Path) -> None:
    prov = json.loads((small / "reports/provenance.json").read_text())
    assert set(prov) == {"version", "inputs", "outputs", "predictions", "upstream", "params",
                         "params_fingerprint", "git", "packages", "sample"}
    for section, kind in (("inputs", "items"), ("inputs", "predictions"), ("outputs", "scores")):
        for t in TRACKS:
            path = small / f"data/{kind}" / SCORE_FILES[t]
            assert prov[section][path.as_posix()] == sha256_file(path)
    assert prov["predictions"][TRACK_N]["backend"] == "replay"
    # Only the content-defining part of fetch: mirrors and URLs say where from, not what.
    assert prov["upstream"] == {"repo": "o/r", "revision": "abc", "folder": "RIMO",
                                "sha256": {"RIMO-N.jsonl": "ab" * 32}}
    assert prov["params"] == {"score": {"bootstrap": BOOT}}
    assert prov["params_fingerprint"] == params_fingerprint(prov["upstream"], prov["predictions"],
                                                            prov["params"]["score"])
    assert prov["packages"]["pandas"] == pd.__version__ and "python" in prov["packages"]
    # The commit is the one of the repo the stage runs in (the cwd), not of the data folders.
    assert prov["git"]["commit"] == git_state(".")["commit"]


def test_provenance_is_deterministic_and_tracks_inputs(small: Path) -> None:
    preds = frames(small, "predictions")
    args: dict[str, Any] = {"inputs": [small / "r.jsonl"], "outputs": [], "predictions": preds,
                            "score_params": {"bootstrap": BOOT},
                            "fetch_cfg": typed_section(FetchParams, "fetch", FETCH), "root": small}
    first = build_provenance(**args)
    assert build_provenance(**args) == first
    assert first["inputs"] == {"r.jsonl": sha256_file(small / "r.jsonl")}
    (small / "r.jsonl").write_text("changed\n")
    assert build_provenance(**args)["inputs"] != first["inputs"]
    other = build_provenance(**{**args, "score_params": {"bootstrap": {**BOOT, "seed": 1}}})
    assert other["params_fingerprint"] != first["params_fingerprint"]


def test_git_state_records_commit_and_dirty_sources(tmp_path: Path) -> None:
    assert git_state(tmp_path) == {"commit": None, "dirty": None}  # not a git repo
    sh(tmp_path, "git", "init", "-q")
    (tmp_path / "params.yaml").write_text("a: 1\n")
    sh(tmp_path, "git", "add", "-A")
    sh(tmp_path, "git", "commit", "-qm", "x")
    head = sh(tmp_path, "git", "rev-parse", "HEAD").stdout.strip()
    assert git_state(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "notes.txt").write_text("not a source\n")
    assert git_state(tmp_path)["dirty"] is False
    # Params are tracked on their own (a `dvc exp run -S` edits them): not dirty sources.
    (tmp_path / "params.yaml").write_text("a: 2\n")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "rimo_eval").mkdir()
    (tmp_path / "rimo_eval/x.py").write_text("print(1)\n")
    assert git_state(tmp_path) == {"commit": head, "dirty": True}


# --- recomputation on small tables -------------------------------------------------------------


def test_metrics_recompute_and_an_edited_value_breaks(small: Path) -> None:
    metrics = json.loads((small / "reports/metrics.json").read_text())
    breakdown = json.loads((small / "reports/breakdown.json").read_text())
    scores = frames(small, "scores")
    fresh = recompute_metrics(scores, {TRACK_N: 4, TRACK_P: 4}, BOOT,
                              frames(small, "predictions"))
    fresh_metrics, fresh_breakdown = split(fresh)
    sources = {t: f"scores {t}" for t in TRACKS}
    ledger = Ledger()
    results = check_metrics(ledger, metrics, fresh_metrics, "m.json", sources)
    results += check_metrics(ledger, breakdown, fresh_breakdown, "b.json", sources)
    assert not ledger.breaks and all(r.recomputes for r in results)
    assert {r.name for r in results} >= {"RIMO-N.accuracy", "RIMO-P.by_parts.2.prefix_score",
                                         "RIMO-N.accuracy_ci_low", "RIMO-P.prefix_score_ci_high",
                                         "sample.total.RIMO-P"}
    metrics[TRACK_N]["accuracy"] = 0.75
    breakdown[TRACK_P]["by_parts"]["2"]["n"] = 9
    del metrics[TRACK_P]["strict"]
    ledger = Ledger()
    check_metrics(ledger, metrics, fresh_metrics, "m.json", sources)
    check_metrics(ledger, breakdown, fresh_breakdown, "b.json", sources)
    messages = [c.message for c in ledger.breaks]
    assert len(messages) == 3
    assert any(m.startswith("m.json: RIMO-N.accuracy = 0.75 does not recompute: scores RIMO-N "
                            "give 0.25") for m in messages)
    assert any(m.startswith("b.json: RIMO-P.by_parts.2.n = 9") for m in messages)
    assert any(m.startswith("m.json: RIMO-P.strict is missing") for m in messages)


def test_scores_recompute_from_predictions_and_an_edit_is_named(small: Path) -> None:
    items = {t: pd.read_parquet(small / "data/items" / SCORE_FILES[t]) for t in TRACKS}
    preds = frames(small, "predictions")
    path = small / "data/scores" / SCORE_FILES[TRACK_N]
    ledger = Ledger()
    check_scores(ledger, TRACK_N, items[TRACK_N], preds[TRACK_N], path, "scores.parquet", "src")
    assert not ledger.breaks
    edited = preds[TRACK_N].copy()
    edited.loc[edited["problem_id"] == "2001c1", "prediction"] = "7"  # now right
    check_scores(ledger, TRACK_N, items[TRACK_N], edited, path, "scores.parquet", "src")
    [broken] = ledger.breaks
    assert broken.path == "scores.parquet"
    # The diagnostic that depends on the prediction is named with it.
    assert ("does not recompute from src: 1 rows differ (2001c1) in correct, lenient_match, "
            "prediction") in broken.message


def test_item_content_hashes_are_checked(tmp_path: Path) -> None:
    write_items(tmp_path, [n_item("2001a1", "1"), n_item("2001a2", "2")], [])
    path = tmp_path / "rimo_n.parquet"
    ledger = Ledger()
    check_items(ledger, path, "items.parquet")
    assert not ledger.breaks
    table = pq.read_table(path).to_pylist()
    table[1]["answer"] = "3"  # edited by hand, hash left as it was
    pq.write_table(pa.Table.from_pylist(table, schema=pq.read_schema(path)), path)
    check_items(ledger, path, "items.parquet")
    [broken] = ledger.breaks
    assert broken.path == "items.parquet" and "2001a2" in broken.message


def test_unreadable_inputs_are_data_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"reports/metrics\.json: not found"):
        run_audit(tmp_path)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports/metrics.json").write_text("{not json")
    with pytest.raises(DataError, match=r"reports/metrics\.json: not valid JSON"):
        run_audit(tmp_path)
    (tmp_path / "reports/metrics.json").write_text("{}")
    (tmp_path / "dvc.lock").write_text("stages: [unclosed\n")
    with pytest.raises(DataError, match=r"dvc\.lock: invalid YAML"):
        run_audit(tmp_path)


# --- dvc.lock checks on a hand-written lock ----------------------------------------------------


LOCK = {"stages": {
    "make": {"deps": [{"path": "src.txt", "hash": "md5", "md5": ""}],
             "params": {"params.yaml": {"make": {"k": 1}}},
             "outs": [{"path": "out", "hash": "md5", "md5": ""}]},
    "use": {"deps": [{"path": "out", "hash": "md5", "md5": ""}],
            "params": {"params.yaml": {"use.x": "a"}},
            "outs": [{"path": "m.json", "hash": "md5", "md5": ""}]},
    "later": {"deps": [{"path": "m.json", "hash": "md5", "md5": ""}], "outs": []},
}}


def test_lock_chain_md5s_and_params(tmp_path: Path) -> None:
    (tmp_path / "src.txt").write_text("code\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out/b.txt").write_text("b\n")
    (tmp_path / "out/a.txt").write_text("a\n")
    (tmp_path / "m.json").write_text("{}\n")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"make": {"k": 1}, "use": {"x": "a"}}))
    # DVC's folder hash, written out independently: md5 of its sorted JSON listing + ".dir".
    listing = json.dumps([{"md5": hashlib.md5(b"a\n").hexdigest(), "relpath": "a.txt"},
                          {"md5": hashlib.md5(b"b\n").hexdigest(), "relpath": "b.txt"}],
                         sort_keys=True)
    md5 = {"src.txt": hashlib.md5(b"code\n").hexdigest(),
           "m.json": hashlib.md5(b"{}\n").hexdigest(),
           "out": hashlib.md5(listing.encode()).hexdigest() + ".dir"}
    lock = json.loads(json.dumps(LOCK))
    for stage in lock["stages"].values():
        for entry in [*stage["deps"], *stage["outs"]]:
            entry["md5"] = md5[entry["path"]]
    assert upstream_stages(lock, "m.json") == ["make", "use"]

    sh(tmp_path, "dvc", "init", "--no-scm", "-q")  # hashes come from DVC, for its repo

    def breaks() -> list[str]:
        ledger = Ledger()
        hashes = DvcHashes(tmp_path)
        try:
            check_lock(ledger, tmp_path, lock, ["make", "use"], hashes, {"out"})
        finally:
            hashes.close()
        return [c.message for c in ledger.breaks]

    assert breaks() == []
    (tmp_path / "out/a.txt").write_text("A\n")
    got = breaks()
    assert len(got) == 2 and all(m.startswith("out: md5 on disk") for m in got)
    (tmp_path / "out/a.txt").write_text("a\n")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"make": {"k": 2}, "use": {"x": "a"}}))
    assert breaks() == ["dvc.lock is stale: params.yaml make.k is 2, dvc.lock (make) recorded 1; "
                        "rerun `dvc repro`"]


def test_first_difference_names_the_leaf() -> None:
    assert first_difference({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}, "p") == \
        ("p.a.c", 2, 3)
    assert first_difference([1, 2], [1, 2], "k") is None
    missing = first_difference({"a": 1}, {}, "s")
    assert missing is not None and missing[0] == "s.a"


# --- end to end on the real pipeline -----------------------------------------------------------


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, oracle_run: Path) -> Path:
    repo = copy_repo(oracle_run, tmp_path_factory.mktemp("audit") / "repo")
    return repo


def audit(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``rimo-eval audit ARGS``, its CLI entry in-process (one test runs the command itself)."""
    return audit_cli(repo, *args)


def audit_json(repo: Path) -> dict[str, Any]:
    return json.loads(audit(repo, "--json").stdout)


@contextlib.contextmanager
def restored(repo: Path, *rels: str) -> Iterator[None]:
    """Let a test damage files of the shared repo; put the exact bytes back afterwards."""
    saved = {rel: (repo / rel).read_bytes() for rel in rels}
    try:
        yield
    finally:
        for rel, data in saved.items():
            (repo / rel).write_bytes(data)


def break_paths(report: dict[str, Any]) -> set[str]:
    return {b["path"] for b in report["breaks"]}


PRED_N = "data/predictions/rimo_n.parquet"
METRICS = "reports/metrics.json"
BREAKDOWN = "reports/breakdown.json"
PROVENANCE = "reports/provenance.json"


def edit_prediction(repo: Path) -> str:
    path = repo / PRED_N
    df = pd.read_parquet(path)
    pid = df["problem_id"].iloc[7]
    df.loc[7, "prediction"] = "123456789"
    pq.write_table(pa.Table.from_pandas(df, schema=PREDICTION_SCHEMAS[TRACK_N],
                                        preserve_index=False), path, compression="zstd")
    return str(pid)


@pytest.mark.slow
def test_clean_repo_passes_with_a_chain_per_metric(repo: Path) -> None:
    proc = sh(repo, "rimo-eval", "audit", check=False)  # the installed command
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("audit: OK: ")
    assert "RIMO-N.accuracy = 1.0  [ok]" in proc.stdout
    assert "<- predictions data/predictions/rimo_n.parquet" in proc.stdout
    assert "backend oracle, fingerprint" in proc.stdout
    assert "ziye2chen/RIMO@af7cb3d5e9b0 RIMO-N.jsonl 71a4d791210a" in proc.stdout
    report = audit_json(repo)
    assert report["ok"] and report["breaks"] == [] and report["warnings"] == []
    assert len(report["metrics"]) > 40 and all(m["ok"] for m in report["metrics"])
    assert [link["kind"] for link in report["chains"][TRACK_P]] == [
        "scores", "predictions", "items", "upstream"]
    assert [link["stage"] for link in report["chains"][TRACK_N]] == [
        "score", "predict", "validate", "fetch"]
    head = sh(repo, "git", "rev-parse", "HEAD").stdout.strip()
    prov = json.loads((repo / PROVENANCE).read_text())
    assert prov["git"] == {"commit": head, "dirty": False}
    pointer = json.loads((repo / METRICS).read_text())["provenance"]
    assert pointer == [PROVENANCE, sha256_file(repo / PROVENANCE)]
    assert prov["inputs"][PRED_N] == sha256_file(repo / PRED_N)


@pytest.mark.slow
def test_rerun_gives_a_byte_identical_metrics_file(repo: Path) -> None:
    before = {rel: (repo / rel).read_bytes() for rel in (METRICS, BREAKDOWN, PROVENANCE)}
    sh(repo, "dvc", "repro", "-f", "-s", "score")
    assert {rel: (repo / rel).read_bytes() for rel in before} == before
    assert audit(repo).returncode == 0


@pytest.mark.slow
def test_edited_prediction_row_is_named(repo: Path) -> None:
    with restored(repo, PRED_N):
        pid = edit_prediction(repo)
        proc = audit(repo)
        assert proc.returncode == 1
        assert proc.stdout.startswith("audit: FAILED")
        assert f"{PRED_N}: md5 on disk" in proc.stdout and "dvc.lock (predict outs" in proc.stdout
        assert f"({pid}) in correct, lenient_match, prediction" in proc.stdout
        report = audit_json(repo)
        assert PRED_N in break_paths(report)
        assert not report["chains"][TRACK_N][1]["ok"] and report["chains"][TRACK_P][1]["ok"]
    assert audit(repo).returncode == 0


@pytest.mark.slow
def test_edit_recorded_in_the_lock_still_fails(repo: Path) -> None:
    # `dvc commit` makes the lock agree with the edit; the recomputation and the provenance
    # block must still catch that the scores and metrics were not made from these predictions.
    with restored(repo, PRED_N, "dvc.lock"):
        pid = edit_prediction(repo)
        sh(repo, "dvc", "commit", "-f", "-q")
        report = audit_json(repo)
        assert not report["ok"]
        kinds = {(b["kind"], b["path"]) for b in report["breaks"]}
        assert ("scores", "data/scores/rimo_n.parquet") in kinds
        assert ("provenance", PRED_N) in kinds
        assert not any(b["kind"] == "lock" for b in report["breaks"])
        assert any(pid in b["message"] for b in report["breaks"])
    assert audit(repo).returncode == 0


@pytest.mark.slow
def test_edited_metric_value_is_named(repo: Path) -> None:
    with restored(repo, BREAKDOWN):
        breakdown = json.loads((repo / BREAKDOWN).read_text())
        breakdown[TRACK_P]["by_parts"]["3"]["strict"] = 0.5
        (repo / BREAKDOWN).write_text(json.dumps(breakdown, indent=2, sort_keys=True) + "\n")
        proc = audit(repo)
        assert proc.returncode == 1
        assert (f"{BREAKDOWN}: RIMO-P.by_parts.3.strict = 0.5 does not recompute: "
                f"data/scores/rimo_p.parquet give 1.0") in proc.stdout
        assert f"{BREAKDOWN}: md5 on disk" in proc.stdout
        report = audit_json(repo)
        assert break_paths(report) == {BREAKDOWN}
        bad = [m["name"] for m in report["metrics"] if not m["recomputes"]]
        assert bad == ["RIMO-P.by_parts.3.strict"]
    with restored(repo, METRICS):
        metrics = json.loads((repo / METRICS).read_text())
        metrics[TRACK_P]["prefix_score_ci_low"] = 0.0
        (repo / METRICS).write_text(json.dumps(metrics, indent=2) + "\n")
        report = audit_json(repo)
        assert break_paths(report) == {METRICS}
        assert [m["name"] for m in report["metrics"] if not m["recomputes"]] == [
            "RIMO-P.prefix_score_ci_low"]
    assert audit(repo).returncode == 0


@pytest.mark.slow
def test_provenance_file_and_its_pointer_are_checked(repo: Path) -> None:
    """An edited provenance.json breaks the pointer in metrics.json and the lock's md5; one
    that is gone is named, not a traceback."""
    with restored(repo, PROVENANCE):
        prov = json.loads((repo / PROVENANCE).read_text())
        prov["params_fingerprint"] = "0" * 64
        (repo / PROVENANCE).write_text(json.dumps(prov, indent=2, sort_keys=True) + "\n")
        report = audit_json(repo)
        checks = {(b["check"], b["path"]) for b in report["breaks"]}
        assert ("provenance.pointer", METRICS) in checks
        assert ("provenance.params_fingerprint", PROVENANCE) in checks
        assert ("lock.md5", PROVENANCE) in checks
        (repo / PROVENANCE).unlink()
        proc = audit(repo)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert f"{PROVENANCE}: not found (written by the score stage" in proc.stdout
    assert audit(repo).returncode == 0


@pytest.mark.slow
def test_stale_lock_and_edited_upstream_are_named(repo: Path) -> None:
    with restored(repo, "params.yaml"):
        params = yaml.safe_load((repo / "params.yaml").read_text())
        params["score"]["bootstrap"]["seed"] = 7
        (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        proc = audit(repo)
        assert proc.returncode == 1
        assert ("dvc.lock is stale: params.yaml score.bootstrap.seed is 7, dvc.lock (score) "
                "recorded 0") in proc.stdout
    with restored(repo, "data/raw/RIMO-N.csv"):
        with open(repo / "data/raw/RIMO-N.csv", "a", encoding="utf-8") as fh:
            fh.write("\n")
        report = audit_json(repo)
        assert "data/raw/RIMO-N.csv" in break_paths(report)
        assert not report["chains"][TRACK_N][3]["ok"] and report["chains"][TRACK_P][3]["ok"]
        assert any("differs from the pin in params.yaml fetch.sha256" in b["message"]
                   for b in report["breaks"])
    assert audit(repo).returncode == 0


@pytest.mark.slow
def test_text_from_params_reaches_the_terminal_escaped(repo: Path) -> None:
    """A params key holding an ESC sequence (it would retitle the terminal) is named in the
    stale-lock break as a visible escape, in text and in --json (issue 42 §3)."""
    raw = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    with restored(repo, "params.yaml"):
        params = yaml.safe_load((repo / "params.yaml").read_text())
        params["predict"]["openai"]["extra_body"] = {"\x1b]0;pwned\x07": 1}
        (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        text, as_json = audit(repo), audit(repo, "--json")
    for proc in (text, as_json):
        assert proc.returncode == 1, proc.stderr
        assert not raw.search(proc.stdout + proc.stderr), proc.stdout[-2000:]
    assert "params.yaml predict.openai.extra_body.\\x1b]0;pwned\\x07 is 1" in text.stdout
    assert any("predict.openai.extra_body.\x1b]0;pwned\x07" in b["message"]
               for b in json.loads(as_json.stdout)["breaks"])

