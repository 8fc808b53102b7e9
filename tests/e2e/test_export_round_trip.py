"""``rimo-eval export`` beyond k = 1 and clean runs (issue 44): a k = 4 replay run over the real
791 items with missing samples, and a chat run (the fake chat server) with error items, token
usage and reasoning. Each is exported by the real CLI, validated against the every-eval-ever
0.3.0 schemas, and its instance file replayed through the real replay backend's predict and
score stages: the same metrics (provenance aside; the chat run's request count aside: a replay
sends none)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from rimo_eval.artifacts.metrics_files import interval
from rimo_eval.io.hashing import fingerprint
from rimo_eval.params.config import parse_params
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.stage import score
from tests.support.chat_server import ChatServer
from tests.support.eee_schemas import download_schemas, errors
from tests.support.factories import n_item, p_item, predict_section, write_items
from tests.support.leaderboard_runs import replay_rows
from tests.support.pipeline_repo import copy_repo, sh
from tests.support.replay_files import repo_gold, write_jsonl

pytestmark = pytest.mark.slow
K = 4


@pytest.fixture(scope="module")
def eee_schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return download_schemas(tmp_path_factory.mktemp("eee-wheel"))


def run_in(repo: Path, predict_cfg: dict[str, Any], score_cfg: dict[str, Any]) -> None:
    """The real predict and score stages in the repo's workspace, params.yaml saying so (a run
    the export reads as ``workspace``, as after ``dvc repro``, without DVC's time)."""
    params = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8"))
    params["predict"] = {**params["predict"], **predict_cfg}
    params["score"] = {**params["score"], **score_cfg}
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), "utf-8")
    predict(predict_section(params["predict"]), repo / "data/items", repo / "data/predictions")
    whole = parse_params(params)
    score(whole.score, repo / "data/items", repo / "data/predictions", repo / "data/scores",
          repo / "reports/metrics.json", repo / "reports/plots", params=whole)


def export(repo: Path, out: Path) -> tuple[dict[str, Any], Path]:
    sh(repo, "rimo-eval", "export", "--format", "eee", "--out", str(out))
    (agg,) = out.glob("data/rimo/*/*/*[0-9a-f].json")
    block = json.loads(agg.read_text(encoding="utf-8"))
    return block, out / block["detailed_evaluation_results"]["file_path"]


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def replay(repo: Path, instances: Path, out: Path, **predict_cfg: Any) -> dict[str, Any]:
    """The instance file through the real replay backend's predict and score stages, with the
    run's own score params; the metrics.json written."""
    params = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8"))
    cfg = {"backend": "replay", "replay": {"path": str(instances)}, **predict_cfg}
    predict(predict_section(cfg), repo / "data/items", out / "preds")
    whole = parse_params({**params, "predict": {**params["predict"], **cfg}})
    score(whole.score, repo / "data/items", out / "preds", out / "scores",
          out / "metrics.json", out / "plots", params=whole)
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


def numbers(path: Path) -> str:
    block = json.loads(path.read_text(encoding="utf-8"))
    block.pop("provenance")
    return json.dumps(block, indent=2)


@pytest.fixture(scope="module")
def k4(oracle_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A k = 4 replay run over every item (leaderboard_runs' m-k4 replies: about 2% of RIMO-N
    samples missing, the ungradable RIMO-P items missing), pass@1 and pass@2, exported."""
    top = tmp_path_factory.mktemp("export-k4")
    repo = copy_repo(oracle_run, top / "repo")
    gold_n, gold_p = repo_gold(repo)
    write_jsonl(repo / "k4.jsonl", replay_rows("m-k4", 0.5, gold_n, gold_p, samples=K))
    run_in(repo, {"backend": "replay", "samples": K, "replay": {"path": str(repo / "k4.jsonl")}},
           {"pass_at": [1, 2]})
    agg, instances = export(repo, top / "eee")
    return {"repo": repo, "aggregate": agg, "instances": instances}


def test_k4_export_validates_and_carries_every_k_sample_metric(
        k4: dict[str, Any], eee_schemas: dict[str, dict[str, Any]]) -> None:
    agg, metrics = k4["aggregate"], json.loads(
        (k4["repo"] / "reports/metrics.json").read_text("utf-8"))
    assert errors(eee_schemas["eval"], agg) == []
    rows = rows_of(k4["instances"])
    assert len(rows) == agg["detailed_evaluation_results"]["total_rows"] == 791 * K
    assert [e for r in rows for e in errors(eee_schemas["instance"], r)] == []
    # One row per (item, sample), the sample index in metadata.sample.
    for track, items in ((TRACK_N, 335), (TRACK_P, 456)):
        mine = [r for r in rows if r["evaluation_name"] == track]
        assert sorted({r["metadata"]["sample"] for r in mine}) == [str(j) for j in range(K)]
        assert len({(r["sample_id"], r["metadata"]["sample"]) for r in mine}) == items * K
    got = {r["evaluation_result_id"]: r for r in agg["evaluation_results"]}
    k_sample = {f"{TRACK_N}/{m}" for m in ("mean_at_k.accuracy", "pass_at_k", "maj_at_k",
                                             "pass_at.1", "pass_at.2")} | {
        f"{TRACK_P}/{m}" for m in ("mean_at_k.strict", "mean_at_k.sub_problem_accuracy",
                                   "mean_at_k.prefix_score", "pass_at_k")}
    assert k_sample <= set(got)
    assert metrics[TRACK_N]["k"] == metrics[TRACK_P]["k"] == K
    for rid in k_sample:
        track, path = rid.split("/")
        result = got[rid]
        *parents, name = path.split(".")
        block = metrics[track]
        for key in parents:
            block = block[key]
        config = result["metric_config"]
        if path.startswith("pass_at."):  # pass@j of k: the estimator's j and n
            assert result["score_details"]["score"] == metrics[track]["pass_at"][name]
            assert config["metric_parameters"] == {"k": int(name), "n": K}
            continue
        assert result["score_details"]["score"] == block[name]
        assert config["metric_parameters"] == {"k": K}
        ci = result["score_details"]["uncertainty"]["confidence_interval"]
        assert (ci["lower"], ci["upper"]) == interval(block, name)
        assert ci["lower"] < block[name] < ci["upper"]


def test_k4_export_replays_to_the_same_metrics(k4: dict[str, Any], tmp_path: Path) -> None:
    """The samples land on their indices (metadata.sample) and the missing ones stay missing:
    metrics.json byte for byte, provenance aside."""
    metrics = json.loads((k4["repo"] / "reports/metrics.json").read_text("utf-8"))
    assert metrics[TRACK_N]["missing"] > 0  # the run has missing samples to carry
    replay(k4["repo"], k4["instances"], tmp_path, samples=K)
    assert numbers(tmp_path / "metrics.json") == numbers(k4["repo"] / "reports/metrics.json")


def _item(row: dict[str, Any], problem: str) -> dict[str, Any]:
    row = {k: v for k, v in row.items() if k != "content_hash"} | {"problem": problem}
    return {**row, "content_hash": fingerprint(row)}


@pytest.fixture(scope="module")
def chat(oracle_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A chat run (openai backend, the fake chat server) of eight small items: right, wrong,
    with reasoning tokens, and one item per track whose every request fails (HTTP 400: an
    error row), exported."""
    top = tmp_path_factory.mktemp("export-chat")
    repo = copy_repo(oracle_run, top / "repo")
    write_items(repo / "data/items",
                [_item(n_item("2001a1", "12"), "Find x. [[gold:12]]"),
                 _item(n_item("2001a2", "-3"), "Find y. [[gold:4]]"),
                 _item(n_item("2001c1", "7"), "Count. [[reasoning:7]]"),
                 _item(n_item("2001c2", "100"), "Broken. [[fail:400:*]]")],
                [p_item("2001a1", ["s1"]), _item(p_item("2001g1", ["g1", "g2"]),
                                                 "Prove. [[fail:400:*]]"),
                 p_item("2001n1", ["n1", "n2", "n3"])])
    server = ChatServer().start()
    try:
        run_in(repo, {"backend": "openai", "limit": None, "samples": 1, "allow_errors": 0.5,
                      "openai": {"base_url": server.base_url, "model": "fake-model",
                                 "api_key_env": None, "cache_dir": str(top / "cache"),
                                 "max_retries": 0, "max_tokens": 100}}, {})
    finally:
        server.stop()
    agg, instances = export(repo, top / "eee")
    return {"repo": repo, "aggregate": agg, "instances": instances}


def test_chat_export_keeps_errors_and_usage(chat: dict[str, Any],
                                            eee_schemas: dict[str, dict[str, Any]]) -> None:
    rows = rows_of(chat["instances"])
    assert [e for r in rows for e in errors(eee_schemas["instance"], r)] == []
    assert errors(eee_schemas["eval"], chat["aggregate"]) == []
    failed = [r for r in rows if r["metadata"]["status"] == "error"]
    assert {(r["evaluation_name"], r["sample_id"]) for r in failed} == {
        (TRACK_N, "2001c2"), (TRACK_P, "2001g1")}
    assert all("400" in r["error"] and r["output"]["raw"] == [] for r in failed)
    usage = [r["token_usage"] for r in rows if r["metadata"]["status"] == "ok"]
    assert all(u is not None and u["input_tokens"] > 0 and u["output_tokens"] > 0
               for u in usage)
    (thought,) = [r for r in rows if r["sample_id"] == "2001c1" and
                  r["evaluation_name"] == TRACK_N]
    assert thought["token_usage"]["reasoning_tokens"] > 0
    assert "\\boxed{7}" in thought["output"]["reasoning_trace"][0]


def test_chat_export_replays_errors_and_token_usage(chat: dict[str, Any], tmp_path: Path
                                                    ) -> None:
    """Errors replay as errors (their message kept, behind the row's place in the file), the
    token counts as they were; only the request count differs (a replay sends none)."""
    got = replay(chat["repo"], chat["instances"], tmp_path, allow_errors=0.5)
    want = json.loads((chat["repo"] / "reports/metrics.json").read_text("utf-8"))
    for track in TRACKS:
        assert want[track]["errors"] == got[track]["errors"] == 1
        assert want[track]["usage"]["requests"] > 0 and got[track]["usage"]["requests"] == 0
        for block in (want, got):
            block[track]["usage"].pop("requests")
    want.pop("provenance")
    got.pop("provenance")
    assert json.dumps(got, indent=2) == json.dumps(want, indent=2)
    preds = pd.read_parquet(tmp_path / "preds/rimo_n.parquet")
    (error,) = preds[preds["status"] == "error"]["error"]
    source = next(r for r in rows_of(chat["instances"]) if r["metadata"]["status"] == "error")
    assert error.startswith(f"{chat['instances']}:") and error.endswith(source["error"])


def test_bare_predictions_with_unbalanced_braces_replay_as_they_were(
        oracle_run: Path, tmp_path: Path) -> None:
    """A replay of bare answers keeps no reply: the export writes ``\\boxed{prediction}``,
    which RIMO's extraction cannot read back where the braces do not balance (``a}b`` would
    give ``a``, ``{x`` nothing); the import takes the bare prediction the row states."""
    repo = copy_repo(oracle_run, tmp_path / "repo")
    gold_n, gold_p = repo_gold(repo)
    odd = ["a}b", "{x", "x}}", "\\frac{1}{2"]
    rows = [{"track": TRACK_N, "problem_id": pid,
             "prediction": odd[i] if i < len(odd) else ans}
            for i, (pid, ans) in enumerate(sorted(gold_n.items()))]
    rows += [{"track": TRACK_P, "problem_id": pid, "prediction": sols}
             for pid, sols in gold_p.items()]
    write_jsonl(repo / "bare.jsonl", rows)
    run_in(repo, {"backend": "replay", "replay": {"path": str(repo / "bare.jsonl")}}, {})
    _, instances = export(repo, tmp_path / "eee")
    replay(repo, instances, tmp_path / "again")
    preds = pd.read_parquet(tmp_path / "again/preds/rimo_n.parquet")
    assert set(odd) <= set(preds["prediction"])
    assert numbers(tmp_path / "again/metrics.json") == numbers(repo / "reports/metrics.json")
