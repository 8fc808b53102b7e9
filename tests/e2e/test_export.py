"""``rimo-eval export`` on the full oracle run, through the real CLI: the Every Eval Ever files
validate against the schemas of the every-eval-ever 0.3.0 wheel, hold 791 rows, carry
metrics.json's numbers and intervals, and replay (the real replay backend, predict and score
stages) to the same metrics; hostile model text exports as valid JSON; the hf file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from rimo_eval.artifacts.metrics_files import interval
from rimo_eval.io.hashing import sha256_file
from rimo_eval.params.config import parse_params
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.stage import score
from tests.support.eee_schemas import download_schemas, errors
from tests.support.factories import predict_section
from tests.support.pipeline_repo import copy_repo, sh

pytestmark = pytest.mark.slow
ITEMS = 335 + 456  # every item of both tracks, k = 1


@pytest.fixture(scope="session")
def eee_schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return download_schemas(tmp_path_factory.mktemp("eee-wheel"))


@pytest.fixture(scope="module")
def exported(oracle_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A private copy of the oracle run, exported once by the real CLI (eee and hf)."""
    top = tmp_path_factory.mktemp("export")
    repo = copy_repo(oracle_run, top / "repo")
    sh(repo, "rimo-eval", "export", "--format", "eee", "--out", str(top / "eee"))
    sh(repo, "rimo-eval", "export", "workspace", "--format", "hf", "--out", str(top / "hf"))
    (agg,) = (top / "eee").glob("data/rimo/*/*/*[0-9a-f].json")
    return {"repo": repo, "eee": top / "eee", "aggregate": agg, "hf": top / "hf"}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_eee_export_validates_and_carries_the_metrics(
        exported: dict[str, Path], eee_schemas: dict[str, dict[str, Any]]) -> None:
    agg = json.loads(exported["aggregate"].read_text(encoding="utf-8"))
    assert errors(eee_schemas["eval"], agg) == []
    pointer = agg["detailed_evaluation_results"]
    instances = exported["eee"] / pointer["file_path"]
    rows = _rows(instances)
    assert len(rows) == pointer["total_rows"] == ITEMS
    assert pointer["checksum"] == sha256_file(instances)
    assert [e for r in rows for e in errors(eee_schemas["instance"], r)] == []
    # Every primary metric, with metrics.json's value and interval, the method named.
    metrics = json.loads((exported["repo"] / "reports/metrics.json").read_text("utf-8"))
    got = {r["evaluation_result_id"]: r for r in agg["evaluation_results"]}
    assert set(got) == {"RIMO-N/accuracy", "RIMO-P/strict", "RIMO-P/prefix_score",
                        "RIMO-P/sub_problem_accuracy"}
    for rid, result in got.items():
        track, metric = rid.split("/")
        ci = result["score_details"]["uncertainty"]["confidence_interval"]
        assert result["score_details"]["score"] == metrics[track][metric]
        assert (ci["lower"], ci["upper"]) == interval(metrics[track], metric)
        assert "Wilson" in ci["method"] and ci["confidence_level"] == 0.95
    assert agg["eval_library"]["name"] == "rimo-eval" and agg["model_info"]["name"] == "oracle"
    # One row per item (k = 1), ids and hashes as the schema says.
    by_track = {t: [r for r in rows if r["evaluation_name"] == t] for t in (TRACK_N, TRACK_P)}
    assert (len(by_track[TRACK_N]), len(by_track[TRACK_P])) == (335, 456)
    assert sum(r["evaluation"]["is_correct"] for r in by_track[TRACK_N]) == \
        metrics[TRACK_N]["correct"]
    first = by_track[TRACK_N][0]
    assert first["metadata"]["sample"] == "0" and first["output"]["raw"] == \
        [f"\\boxed{{{first['input']['reference'][0]}}}"]
    assert first["metadata"]["output_raw"] == "prediction"  # the oracle keeps no reply


def test_replaying_the_export_gives_the_same_metrics(exported: dict[str, Path],
                                                     tmp_path: Path) -> None:
    """The instance file through the real replay backend, predict and score stages: the same
    metrics.json, byte for byte, but its provenance pointer."""
    repo = exported["repo"]
    agg = json.loads(exported["aggregate"].read_text(encoding="utf-8"))
    instances = exported["eee"] / agg["detailed_evaluation_results"]["file_path"]
    params = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8"))
    predict(predict_section(backend="replay", replay={"path": str(instances)}, allow_errors=0),
            repo / "data/items", tmp_path / "preds")
    whole = parse_params({**params, "predict": {**params["predict"], "backend": "replay"}})
    score(whole.score, repo / "data/items", tmp_path / "preds", tmp_path / "scores",
          tmp_path / "metrics.json", tmp_path / "plots", params=whole)

    def numbers(path: Path) -> str:
        block = json.loads(path.read_text(encoding="utf-8"))
        block.pop("provenance")
        return json.dumps(block, indent=2)

    assert numbers(tmp_path / "metrics.json") == numbers(repo / "reports/metrics.json")


def test_hostile_text_exports_as_valid_json(exported: dict[str, Path], tmp_path: Path,
                                            eee_schemas: dict[str, dict[str, Any]]) -> None:
    """Replies holding a lone surrogate (a details JSON escape), NUL and a 1 MB line: every row
    is valid UTF-8 JSON and valid EEE; the repair is flagged; the reply is kept where RIMO's
    extraction gives the prediction back."""
    repo = copy_repo(exported["repo"], tmp_path / "repo")
    path = repo / "data/predictions/rimo_n.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    gold = [r["prediction"] for r in rows[:3]]
    texts = [f"bad \\ud800 then \\\\boxed{{{gold[0]}}}",
             f"nul \\u0000 here \\\\boxed{{{gold[1]}}}",
             "x" * 2**20 + f" \\\\boxed{{{gold[2]}}}"]
    for row, text in zip(rows, texts, strict=False):
        row["details"] = '{"text": "' + text + '"}'
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    out = tmp_path / "eee"
    sh(repo, "rimo-eval", "export", "--format", "eee", "--out", str(out))
    (samples,) = out.glob("data/rimo/*/*/*_samples.jsonl")
    raw = samples.read_bytes()
    raw.decode("utf-8")  # valid UTF-8 throughout
    lines = [json.loads(line) for line in raw.splitlines()[:3]]
    assert [e for r in lines for e in errors(eee_schemas["instance"], r)] == []
    assert lines[0]["metadata"]["repaired"] and "\ufffd" in lines[0]["output"]["raw"][0]
    assert "\x00" in lines[1]["output"]["raw"][0] and "repaired" not in lines[1]["metadata"]
    assert len(lines[2]["output"]["raw"][0]) > 2**20
    assert [r["metadata"]["output_raw"] for r in lines] == ["reply"] * 3


def test_hf_file(exported: dict[str, Path]) -> None:
    """The primary metrics in percent, the dataset id, the source and the run's date (its
    commit's, not today's)."""
    entries = yaml.safe_load((exported["hf"] / ".eval_results/rimo.yaml").read_text("utf-8"))
    metrics = json.loads((exported["repo"] / "reports/metrics.json").read_text("utf-8"))
    date = sh(exported["repo"], "git", "show", "-s", "--format=%cI", "HEAD").stdout[:10]
    assert [(e["dataset"]["task_id"], e["value"]) for e in entries] == [
        ("rimo_n_accuracy", round(100 * metrics[TRACK_N]["accuracy"], 2)),
        ("rimo_p_strict", round(100 * metrics[TRACK_P]["strict"], 2)),
        ("rimo_p_prefix_score", round(100 * metrics[TRACK_P]["prefix_score"], 2)),
        ("rimo_p_sub_problem_accuracy", round(100 * metrics[TRACK_P]["sub_problem_accuracy"],
                                              2))]
    assert {e["dataset"]["id"] for e in entries} == {"ziye2chen/RIMO"}
    assert {e["date"] for e in entries} == {date}
    assert all(e["source"]["url"].startswith("https://github.com/") for e in entries)


def test_out_folder_not_ours_is_refused(exported: dict[str, Path], tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep", encoding="utf-8")
    proc = sh(exported["repo"], "rimo-eval", "export", "--format", "eee", "--out", str(mine),
              check=False)
    assert proc.returncode == 1 and "did not write" in proc.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
