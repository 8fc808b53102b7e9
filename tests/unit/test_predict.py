"""Stage predict: registry, sampling, the built-in backends and replay files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.errors import DataError, StageError
from rimo_eval.predict import predict, select_sample
from rimo_eval.predictors import available_backends, create_predictor
from rimo_eval.predictors.registry import predictor_class
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import predict_section, small_benchmark


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    small_benchmark(tmp_path / "items")
    return tmp_path


def run_predict(bench: Path, cfg: dict) -> dict[str, pd.DataFrame]:
    predict(predict_section(cfg), bench / "items", bench / "preds")
    return {t: pd.read_parquet(predictions_path(t, bench / "preds")) for t in (TRACK_N, TRACK_P)}


def test_builtin_backends_come_from_entry_points() -> None:
    assert {"oracle", "constant", "replay"} <= set(available_backends())
    assert predictor_class("oracle").name == "oracle"


PLUGIN = """
from rimo_eval.predictors.base import Prediction, Predictor

class Echo(Predictor):
    name = "echo"

    def predict(self, items):
        return [Prediction(it.track, it.problem_id, "echo") for it in items]
"""


def test_a_plugin_backend_is_found_and_cannot_take_a_builtin_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built-ins come from this package's own metadata; other names from every distribution."""
    dist = tmp_path / "rimo_echo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rimo-echo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[rimo_eval.predictors]\necho = rimo_echo:Echo\noracle = rimo_echo:Echo\n")
    (tmp_path / "rimo_echo.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert predictor_class("echo").__module__ == "rimo_echo"
    assert predictor_class("oracle").__module__ == "rimo_eval.predictors.oracle"
    assert "echo" in available_backends()


def test_unknown_backend_is_a_clear_error() -> None:
    with pytest.raises(StageError, match=r"'gpt-9' is not registered; known: .*oracle"):
        create_predictor("gpt-9")


def test_oracle_returns_gold_with_provenance(bench: Path) -> None:
    out = run_predict(bench, {"backend": "oracle"})
    n, p = out[TRACK_N], out[TRACK_P]
    assert n["problem_id"].tolist() == ["2001a1", "2001a2", "2001c1", "2001c2"]
    assert n["prediction"].tolist() == ["12", "-3", "7", "100"]
    assert [list(x) for x in p["prediction"]] == [["s1"], ["g1", "g2"], ["n1", "n2", "n3"], [""]]
    assert set(n["backend"]) == {"oracle"} and n["fingerprint"].nunique() == 1
    assert (n["status"] == "ok").all()
    assert n["fingerprint"][0] == p["fingerprint"][0]


def test_fingerprint_follows_params(bench: Path) -> None:
    a = run_predict(bench, {"backend": "constant", "constant": {"answer": "1"}})[TRACK_N]
    b = run_predict(bench, {"backend": "constant", "constant": {"answer": "2"}})[TRACK_N]
    assert a["fingerprint"][0] != b["fingerprint"][0]
    assert json.loads(b["backend_params"][0]) == {"answer": "2"}
    assert set(b["prediction"]) == {"2"}


def test_constant_gives_one_solution_per_part(bench: Path) -> None:
    p = run_predict(bench, {"backend": "constant", "constant": {"solution": "x"}})[TRACK_P]
    assert [len(x) for x in p["prediction"]] == [1, 2, 3, 1]


def test_predictions_are_byte_identical_across_runs(bench: Path) -> None:
    run_predict(bench, {"backend": "oracle"})
    first = predictions_path(TRACK_P, bench / "preds").read_bytes()
    run_predict(bench, {"backend": "oracle"})
    assert predictions_path(TRACK_P, bench / "preds").read_bytes() == first


def test_sample_is_seeded_and_nested(bench: Path) -> None:
    from rimo_eval.artifacts.items import load_items
    items = load_items(TRACK_N, bench / "items")
    two, three = select_sample(items, 2, 0), select_sample(items, 3, 0)
    assert [i.problem_id for i in two] == [i.problem_id for i in three][:2]
    assert select_sample(items, 2, 0) == two
    out = run_predict(bench, {"backend": "oracle", "limit": 2})
    assert len(out[TRACK_N]) == 2 and len(out[TRACK_P]) == 2
    with pytest.raises(StageError, match=r"predict\.limit"):
        select_sample(items, -1, 0)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_replay_jsonl_records_missing_items(bench: Path) -> None:
    f = write_jsonl(bench / "r.jsonl", [
        {"track": "RIMO-N", "problem_id": "2001a1", "prediction": " 12 "},
        {"track": "RIMO-P", "problem_id": "2001g1", "prediction": ["g1", "wrong"]},
    ])
    out = run_predict(bench, {"backend": "replay", "replay": {"path": str(f)}})
    n = out[TRACK_N].set_index("problem_id")
    assert n.loc["2001a1", "prediction"] == " 12 " and n.loc["2001a1", "status"] == "ok"
    assert n.loc["2001a2", "status"] == "missing" and pd.isna(n.loc["2001a2", "prediction"])
    p = out[TRACK_P].set_index("problem_id")
    assert list(p.loc["2001g1", "prediction"]) == ["g1", "wrong"]
    assert (p["status"] == "missing").sum() == 3


def test_replay_fingerprint_follows_file_content(bench: Path) -> None:
    f = bench / "r.jsonl"
    row = {"track": "RIMO-N", "problem_id": "2001a1", "prediction": "1"}
    write_jsonl(f, [row])
    a = run_predict(bench, {"backend": "replay", "replay": {"path": str(f)}})[TRACK_N]
    write_jsonl(f, [{**row, "prediction": "2"}])
    b = run_predict(bench, {"backend": "replay", "replay": {"path": str(f)}})[TRACK_N]
    assert a["fingerprint"][0] != b["fingerprint"][0]


@pytest.mark.parametrize(("rows", "rule"), [
    ([{"track": "RIMO-N", "problem_id": "2001a1", "prediction": "1"},
      {"track": "RIMO-N", "problem_id": "2001a1", "prediction": "2"}], "replay.duplicate"),
    ([{"track": "RIMO-N", "problem_id": "1999z9", "prediction": "1"}], "replay.unknown_id"),
    ([{"track": "RIMO-N", "problem_id": "2001a1", "prediction": ["1"]}], "replay.type"),
    ([{"track": "RIMO-P", "problem_id": "2001a1", "prediction": "s1"}], "replay.type"),
    ([{"track": "RIMO-X", "problem_id": "2001a1", "prediction": "1"}], "replay.fields"),
    ([{"track": "RIMO-N", "problem_id": "2001a1"}], "replay.fields"),
])
def test_bad_replay_rows_are_clear_errors(bench: Path, rows: list[dict], rule: str) -> None:
    f = write_jsonl(bench / "bad.jsonl", rows)
    with pytest.raises(StageError, match=rf"bad.jsonl:\d+.*{rule.replace('.', '[.]')}"):
        run_predict(bench, {"backend": "replay", "replay": {"path": str(f)}})
    assert not (bench / "preds").exists()


def test_replay_rejects_nan_and_bad_json(bench: Path) -> None:
    f = bench / "nan.jsonl"
    f.write_text('{"track": "RIMO-N", "problem_id": "2001a1", "prediction": NaN}\n')
    with pytest.raises(StageError, match=r"nan\.jsonl:1.*replay\.json"):
        run_predict(bench, {"backend": "replay", "replay": {"path": str(f)}})


def test_replay_reads_upstream_csv_folder(bench: Path) -> None:
    folder = bench / "upstream_outputs"
    folder.mkdir()
    (folder / "rimo_n_results.csv").write_text(
        "problem_id,llm_answer\n2001a1,12\n2001c1,\n")
    (folder / "rimo_p_results.csv").write_text(
        "problem_id,llm_solution1,llm_solution2,llm_solution3,llm_solution4\n"
        '2001g1,g1,"g2\nwith newline",,\n2001a1,s1,,,\n')
    out = run_predict(bench, {"backend": "replay", "replay": {"path": str(folder)}})
    n = out[TRACK_N].set_index("problem_id")
    assert n.loc["2001a1", "prediction"] == "12" and n.loc["2001c1", "prediction"] == ""
    p = out[TRACK_P].set_index("problem_id")
    assert list(p.loc["2001g1", "prediction"]) == ["g1", "g2\nwith newline"]
    assert list(p.loc["2001a1", "prediction"]) == ["s1"]


def test_replay_csv_with_unknown_columns(bench: Path) -> None:
    f = bench / "x.csv"
    f.write_text("id,answer\n2001a1,12\n")
    with pytest.raises(StageError, match=r"x\.csv: rule replay\.columns"):
        run_predict(bench, {"backend": "replay", "replay": {"path": str(f)}})


def test_a_backend_returning_a_lone_surrogate_breaks_the_contract() -> None:
    """The chat engine repairs model text where it enters (tests/engine/test_wild_replies.py)
    and replay refuses it naming the line, so only a backend outside both (a plugin) can
    return a lone surrogate: refused before anything is written, like a prediction that is
    not a string."""
    from rimo_eval.artifacts.items import Item
    from rimo_eval.predict import collect
    from rimo_eval.predictors import Prediction
    item = Item(TRACK_N, "2001a1", "p", "algebra", 1, True, "h", answer="1")
    with pytest.raises(DataError, match=r"RIMO-N 2001a1: prediction is not valid Unicode "
                                        r"\(a lone surrogate U\+D800 at index 1\)"):
        collect([Prediction(TRACK_N, "2001a1", "4\ud800")], [item], "test")
