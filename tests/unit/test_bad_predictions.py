"""Bad predictions: replay files and predictions tables that are broken in every way we know.

Each bad replay file is either a StageError naming file, line (and id) and rule, after which the
previous predictions are byte-for-byte intact; or it is accepted with what it lacks recorded
(status 'missing'), and then the score stage still counts every item: metrics ``n`` stays the
item count (never a silently smaller denominator). Cases already in tests/unit/test_predict.py
(duplicate and unknown ids, list/string type mix-ups, NaN, a CSV with other columns) are not
repeated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.errors import StageError
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.stage import score
from tests.support.factories import predict_section, section, small_benchmark

BOOT = section(ScoreParams, "score", bootstrap={"samples": 50, "seed": 0, "confidence": 0.95})
ITEMS = {TRACK_N: 4, TRACK_P: 4}  # tests.support.factories.small_benchmark
GRADABLE_P = 3  # one of its RIMO-P items is ungradable
BIG = 5_000_000  # characters: a runaway generation


def jsonl(*rows: Any) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def n_row(pid: str, prediction: Any) -> dict[str, Any]:
    return {"track": TRACK_N, "problem_id": pid, "prediction": prediction}


def p_row(pid: str, prediction: Any) -> dict[str, Any]:
    return {"track": TRACK_P, "problem_id": pid, "prediction": prediction}


P_HEADER = b"problem_id,llm_solution1,llm_solution2,llm_solution3,llm_solution4\n"


@dataclass(frozen=True)
class Bad:
    """A replay file (or folder: name -> bytes) the predict stage must refuse."""

    name: str
    files: dict[str, bytes]
    rule: str
    line: int | None  # None: a whole-file error
    pid: str | None = None


BAD: list[Bad] = [
    Bad("null RIMO-N prediction", {"r.jsonl": jsonl(n_row("2001a1", None))}, "replay.type", 1,
        "2001a1"),
    Bad("null RIMO-P prediction", {"r.jsonl": jsonl(n_row("2001a1", "12"),
                                                    p_row("2001g1", None))},
        "replay.type", 2, "2001g1"),
    Bad("number for RIMO-N", {"r.jsonl": jsonl(n_row("2001a1", 12))}, "replay.type", 1, "2001a1"),
    Bad("object for RIMO-N", {"r.jsonl": jsonl(n_row("2001a1", {"answer": "12"}))},
        "replay.type", 1, "2001a1"),
    Bad("overflowing number", {"r.jsonl": b'{"track": "RIMO-N", "problem_id": "2001a1", '
                                          b'"prediction": 1e999}\n'}, "replay.type", 1, "2001a1"),
    Bad("number in a RIMO-P list", {"r.jsonl": jsonl(p_row("2001g1", ["g1", 2]))},
        "replay.type", 1, "2001g1"),
    Bad("null in a RIMO-P list", {"r.jsonl": jsonl(p_row("2001g1", ["g1", None]))},
        "replay.type", 1, "2001g1"),
    Bad("nested RIMO-P list", {"r.jsonl": jsonl(p_row("2001g1", [["g1"], ["g2"]]))},
        "replay.type", 1, "2001g1"),
    Bad("Infinity", {"r.jsonl": b'{"track": "RIMO-N", "problem_id": "2001a1", '
                                b'"prediction": -Infinity}\n'}, "replay.json", 1),
    Bad("truncated last line", {"r.jsonl": jsonl(n_row("2001a1", "12"))
                                + jsonl(n_row("2001a2", "-3"))[:-9]}, "replay.json", 2),
    Bad("deeply nested JSON", {"r.jsonl": jsonl(n_row("2001a1", "12")) + b"[" * 100_000 + b"\n"},
        "replay.json", 2),
    Bad("line is an array", {"r.jsonl": jsonl(["RIMO-N", "2001a1", "12"])}, "replay.fields", 1),
    Bad("problem_id is a number", {"r.jsonl": jsonl({"track": TRACK_N, "problem_id": 2001,
                                                     "prediction": "12"})},
        "replay.fields", 1),
    Bad("invalid UTF-8 in JSONL", {"r.jsonl": jsonl(n_row("2001a1", "12"))
                                   + b'{"track": "RIMO-N", "problem_id": "2001a2", '
                                     b'"prediction": "\xff3"}\n'}, "replay.encoding", 2),
    Bad("lone surrogate escape", {"r.jsonl": b'{"track": "RIMO-P", "problem_id": "2001g1", '
                                             b'"prediction": ["g1", "\\udc80"]}\n'},
        "replay.encoding", 1, "2001g1"),
    Bad("id with a trailing space", {"r.jsonl": jsonl(n_row("2001a1 ", "12"))},
        "replay.unknown_id", 1, "2001a1 "),
    Bad("same item in two files of a folder",
        {"a.jsonl": jsonl(n_row("2001a1", "12")), "b.csv": b"problem_id,llm_answer\n2001a1,12\n"},
        "replay.duplicate", 2, "2001a1"),
    Bad("invalid UTF-8 in CSV", {"r.csv": b"problem_id,llm_answer\n2001a1,12\n2001a2,\xe2\x88\n"},
        "replay.encoding", 3),
    Bad("duplicate id in CSV", {"r.csv": b"problem_id,llm_answer\n2001a1,12\n2001a1,13\n"},
        "replay.duplicate", 3, "2001a1"),
    Bad("unknown id in CSV", {"r.csv": P_HEADER + b"2001g1,g1,g2,,\n1999z9,x,,,\n"},
        "replay.unknown_id", 3, "1999z9"),
    Bad("CSV without problem_id", {"r.csv": b"id,llm_answer\n2001a1,12\n"}, "replay.columns",
        None),
    Bad("CSV without solution columns", {"r.csv": b"problem_id,llm_solution\n2001g1,g1\n"},
        "replay.columns", None),
    Bad("CSV without a header", {"r.csv": b"2001a1,12\n2001a2,-3\n"}, "replay.columns", None),
    Bad("empty CSV", {"r.csv": b""}, "replay.columns", None),
    Bad("unquoted comma in an answer", {"r.csv": b"problem_id,llm_answer\n2001c2,1,000\n"},
        "replay.csv", 2, "2001c2"),
    Bad("CSV record cut short", {"r.csv": P_HEADER + b"2001g1,g1,g2,,\n2001n1,n1\n"},
        "replay.csv", 3, "2001n1"),
    # A replay that yields nothing is an error, not a run with every item missing.
    Bad("empty JSONL", {"r.jsonl": b""}, "replay.empty", None),
    Bad("only blank lines", {"r.jsonl": b"\n  \n\r\n"}, "replay.empty", None),
    Bad("CSV with only a header", {"r.csv": b"problem_id,llm_answer\n"}, "replay.empty", None),
    # "sample": j, 0-based, below predict.samples (1 here).
    Bad("sample beyond predict.samples", {"r.jsonl": jsonl({**n_row("2001a1", "12"),
                                                            "sample": 1})},
        "replay.sample", 1, "2001a1"),
    Bad("sample as a string", {"r.jsonl": jsonl({**n_row("2001a1", "12"), "sample": "0"})},
        "replay.sample", 1, "2001a1"),
    Bad("sample as a float", {"r.jsonl": jsonl({**n_row("2001a1", "12"), "sample": 0.0})},
        "replay.sample", 1, "2001a1"),
    Bad("sample as a boolean", {"r.jsonl": jsonl({**n_row("2001a1", "12"), "sample": False})},
        "replay.sample", 1, "2001a1"),
    Bad("negative sample", {"r.jsonl": jsonl({**n_row("2001a1", "12"), "sample": -1})},
        "replay.sample", 1, "2001a1"),
    Bad("same sample twice", {"r.jsonl": jsonl({**n_row("2001a1", "12"), "sample": 0},
                                               n_row("2001a1", "13"))},
        "replay.duplicate", 2, "2001a1"),
    # JSON keeps the last copy of a repeated key: which answer was meant is not known.
    Bad("prediction given twice in one line",
        {"r.jsonl": jsonl(n_row("2001a1", "12"))
         + b'{"track": "RIMO-N", "problem_id": "2001a2", "prediction": "-3", '
           b'"prediction": "7"}\n'}, "replay.duplicate_key", 2),
    Bad("problem_id given twice in a RIMO-P line",
        {"r.jsonl": b'{"track": "RIMO-P", "problem_id": "2001g1", "problem_id": "2001n1", '
                    b'"prediction": ["g1"]}\n'}, "replay.duplicate_key", 1),
    Bad("unterminated quote", {"r.csv": b'problem_id,llm_answer\n2001a1,"12\n2001a2,-3\n'},
        "replay.csv", 3),
]


@dataclass(frozen=True)
class Accepted:
    """A replay file that is usable: what it gives must be stored exactly, the rest 'missing'."""

    name: str
    files: dict[str, bytes]
    ok: dict[tuple[str, str], str | list[str]]  # every prediction that must be stored, exactly
    check: Callable[[dict[str, pd.DataFrame]], None] | None = field(default=None)


def _big_part(frames: dict[str, pd.DataFrame]) -> None:
    scores = frames["scores_p"].set_index("problem_id")
    assert scores.loc["2001g1", "n_matched"] == 1 and not scores.loc["2001g1", "strict"]


def _extra_parts(frames: dict[str, pd.DataFrame]) -> None:
    scores = frames["scores_p"].set_index("problem_id")
    assert scores.loc["2001g1", "n_predicted"] == 3 and scores.loc["2001g1", "n_matched"] == 2
    assert not scores.loc["2001g1", "strict"]  # exactly number_of_parts entries, or wrong


ACCEPTED: list[Accepted] = [
    Accepted("5 MB RIMO-N prediction", {"r.jsonl": jsonl(n_row("2001a1", "1" * BIG))},
             {(TRACK_N, "2001a1"): "1" * BIG}),
    Accepted("5 MB RIMO-P part in a CSV",
             {"r.csv": P_HEADER + b"2001g1,g1," + b"x" * BIG + b",,\n"},
             {(TRACK_P, "2001g1"): ["g1", "x" * BIG]}, _big_part),
    Accepted("byte-order mark before JSONL", {"r.jsonl": b"\xef\xbb\xbf"
                                              + jsonl(n_row("2001a1", "12"))},
             {(TRACK_N, "2001a1"): "12"}),
    Accepted("byte-order mark before CSV", {"r.csv": b"\xef\xbb\xbfproblem_id,llm_answer\r\n"
                                            b"2001a1,12\r\n"}, {(TRACK_N, "2001a1"): "12"}),
    Accepted("CRLF JSONL", {"r.jsonl": jsonl(n_row("2001a1", "12")).replace(b"\n", b"\r\n")},
             {(TRACK_N, "2001a1"): "12"}),
    Accepted("more parts than the item has", {"r.jsonl": jsonl(p_row("2001g1",
                                                                     ["g1", "g2", "g3"]))},
             {(TRACK_P, "2001g1"): ["g1", "g2", "g3"]}, _extra_parts),
    Accepted("empty list", {"r.jsonl": jsonl(p_row("2001g1", []))}, {(TRACK_P, "2001g1"): []}),
    Accepted("one id in both tracks", {"r.jsonl": jsonl(n_row("2001a1", "12"),
                                                        p_row("2001a1", ["s1"]))},
             {(TRACK_N, "2001a1"): "12", (TRACK_P, "2001a1"): ["s1"]}),
    Accepted("markup and control characters", {"r.jsonl": jsonl(n_row(
        "2001a2", "<script>alert(1)</script>\x00\u2028**-3**"))},
             {(TRACK_N, "2001a2"): "<script>alert(1)</script>\x00\u2028**-3**"}),
]


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    """Items, and the oracle's predictions and scores: the previous good run."""
    small_benchmark(tmp_path / "items")
    predict(predict_section({"backend": "oracle"}), tmp_path / "items", tmp_path / "preds")
    run_score(tmp_path)
    return tmp_path


def run_score(root: Path) -> dict[str, Any]:
    return score(BOOT, root / "items", root / "preds", root / "scores", root / "metrics.json",
                 root / "plots")


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def write_replay(root: Path, files: dict[str, bytes]) -> Path:
    folder = root / "replay"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder if len(files) > 1 else folder / next(iter(files))


def assert_full_denominator(metrics: dict[str, Any]) -> None:
    assert metrics[TRACK_N]["n"] == ITEMS[TRACK_N]
    assert metrics[TRACK_P]["n"] == GRADABLE_P
    assert metrics[TRACK_P]["n"] + metrics[TRACK_P]["ungradable"] == ITEMS[TRACK_P]
    assert metrics["sample"] == {"evaluated": ITEMS, "total": ITEMS, "is_sample": False,
                                 "limit": None, "seed": None}


# --- replay files ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", BAD, ids=[c.name for c in BAD])
def test_bad_replay_is_a_clear_error_and_keeps_old_predictions(case: Bad, bench: Path) -> None:
    before = files_under(bench / "preds")
    path = write_replay(bench, case.files)
    with pytest.raises(StageError) as info:
        predict(predict_section(backend="replay", replay={"path": str(path)}), bench / "items",
                bench / "preds")
    message = str(info.value)
    names = "|".join(re.escape(n) for n in case.files)
    where = rf"replay/({names})" + (rf":{case.line}\b" if case.line else ":")
    assert re.search(where, message), message[:300]
    assert f"rule {case.rule}:" in message, message[:300]
    if case.pid is not None:
        assert f"id={case.pid}:" in message, message[:300]
    assert len(message) < 2000  # one readable line, not the 5 MB value
    assert files_under(bench / "preds") == before
    metrics = run_score(bench)
    assert_full_denominator(metrics)
    assert metrics[TRACK_N]["accuracy"] == 1.0  # still the oracle's


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.name for c in ACCEPTED])
def test_usable_replay_is_stored_exactly_and_counts_every_item(case: Accepted,
                                                               bench: Path) -> None:
    path = write_replay(bench, case.files)
    predict(predict_section({"backend": "replay", "replay": {"path": str(path)}}), bench / "items",
            bench / "preds")
    preds = {t: pd.read_parquet(predictions_path(t, bench / "preds")) for t in (TRACK_N, TRACK_P)}
    for track, frame in preds.items():
        assert len(frame) == ITEMS[track]
        for row in frame.to_dict("records"):
            key = (track, row["problem_id"])
            if key in case.ok:
                assert row["status"] == "ok", row["status"]
                value = row["prediction"]
                stored = value if isinstance(value, str) else list(value)
                assert stored == case.ok[key]
            else:
                value = row["prediction"]
                assert row["status"] == "missing", key
                assert value is None or (isinstance(value, float | str) and pd.isna(value)), key
    metrics = run_score(bench)
    assert_full_denominator(metrics)
    n_given = sum(1 for t, _ in case.ok if t == TRACK_N)
    assert metrics[TRACK_N]["missing"] == ITEMS[TRACK_N] - n_given
    if case.check is not None:
        case.check({"scores_p": pd.read_parquet(bench / "scores/rimo_p.parquet")})


# --- the predictions table itself (what score reads) ---------------------------------------


def _rewrite(path: Path, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    table = pq.read_table(path)
    pq.write_table(pa.Table.from_pylist(change(table.to_pylist()), schema=table.schema), path)


@pytest.mark.parametrize(("name", "track", "change", "error"), [
    ("duplicate row", TRACK_N, lambda rows: [*rows, rows[0]], "duplicate problem_id"),
    ("unknown id", TRACK_P, lambda rows: [*rows, {**rows[0], "problem_id": "1999z9"}],
     "unknown problem_id"),
    ("answers another item's content", TRACK_N,
     lambda rows: [{**r, "item_hash": "0" * 64} if i == 1 else r for i, r in enumerate(rows)],
     "other item contents"),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_broken_predictions_table_fails_score_and_keeps_old_scores(
        name: str, track: str, change: Callable, error: str, bench: Path) -> None:
    before = files_under(bench / "scores") | {"metrics": (bench / "metrics.json").read_bytes()}
    _rewrite(predictions_path(track, bench / "preds"), change)
    with pytest.raises(StageError, match=error):
        run_score(bench)
    after = files_under(bench / "scores") | {"metrics": (bench / "metrics.json").read_bytes()}
    assert after == before, name


def test_dropped_rows_are_flagged_as_a_sample_not_hidden(bench: Path) -> None:
    """A predictions table that lost rows is a smaller denominator only with the flag up."""
    _rewrite(predictions_path(TRACK_N, bench / "preds"), lambda rows: rows[:3])
    metrics = run_score(bench)
    assert metrics[TRACK_N]["n"] == 3
    assert metrics["sample"]["is_sample"] is True
    assert metrics["sample"]["evaluated"][TRACK_N] == 3
    assert metrics["sample"]["total"][TRACK_N] == ITEMS[TRACK_N]


def test_ok_status_without_a_value_counts_wrong(bench: Path) -> None:
    _rewrite(predictions_path(TRACK_N, bench / "preds"),
             lambda rows: [{**r, "prediction": None} if i == 0 else r for i, r in enumerate(rows)])
    _rewrite(predictions_path(TRACK_P, bench / "preds"),
             lambda rows: [{**r, "prediction": None} if i == 0 else r for i, r in enumerate(rows)])
    metrics = run_score(bench)
    assert_full_denominator(metrics)
    assert metrics[TRACK_N]["correct"] == ITEMS[TRACK_N] - 1
    assert metrics[TRACK_P]["strict"] == pytest.approx(2 / 3, abs=1e-6)


# --- coverage of the requested sample ---------------------------------------------------------


def test_replay_covering_none_of_the_sample_fails_naming_the_file(bench: Path) -> None:
    """Issue 29 §6: a replay for other items than the ones requested (another predict.limit
    sample or seed) made a run with every item missing, exit 0. It fails, naming the file, and
    the previous predictions stay."""
    from rimo_eval.artifacts.items import load_items
    from rimo_eval.predict import select_sample

    before = files_under(bench / "preds")
    requested = {(t, it.problem_id) for t in (TRACK_N, TRACK_P)
                 for it in select_sample(load_items(t, bench / "items"), 1, 0)}
    others = [row for row in (n_row("2001a1", "12"), n_row("2001a2", "-3"),
                              n_row("2001c1", "7"), p_row("2001g1", ["g1", "g2"]))
              if (row["track"], row["problem_id"]) not in requested]
    assert others  # known items, every one outside the sample of one item per track
    path = write_replay(bench, {"r.jsonl": jsonl(*others)})
    with pytest.raises(StageError) as info:
        predict(predict_section({"backend": "replay", "limit": 1, "replay": {"path": str(path)}}),
                bench / "items", bench / "preds")
    message = str(info.value)
    assert message.startswith(f"{path}: rule replay.coverage: the replay covers none of the 2 "
                              f"requested items"), message
    assert "predict.limit" in message and "predict.sample_seed" in message
    assert files_under(bench / "preds") == before
    # One requested item in it is enough: the run goes on, the rest recorded missing.
    pid = sorted(p for t, p in requested if t == TRACK_N)[0]
    path.write_bytes(jsonl(*others, n_row(pid, "12")))
    predict(predict_section({"backend": "replay", "limit": 1, "replay": {"path": str(path)}}),
            bench / "items", bench / "preds")
    frame = pd.read_parquet(predictions_path(TRACK_P, bench / "preds"))
    assert frame["status"].tolist() == ["missing"]


def test_the_default_replay_example_covers_the_default_sample(tmp_path: Path,
                                                              mirror_dir: Path) -> None:
    """`dvc exp run -S predict.backend=replay` with params.yaml's other defaults: the example
    file answers every item of the default sample (its answers are made up, not upstream's)."""
    import yaml

    from rimo_eval.artifacts.paths import items_path
    from rimo_eval.io.parquet import write_parquet
    from rimo_eval.validate.stage import validate

    root = Path(__file__).resolve().parents[2]
    result = validate(mirror_dir, root / "data/errata.yaml")
    for track, table in result.tables.items():
        write_parquet(table, items_path(track, tmp_path / "items"))
    section = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))["predict"]
    replay = root / section["replay"]["path"]
    predict(predict_section(backend="replay", limit=section["limit"],
                            sample_seed=section["sample_seed"], replay={"path": str(replay)}),
            tmp_path / "items", tmp_path / "preds")
    for track in (TRACK_N, TRACK_P):
        frame = pd.read_parquet(predictions_path(track, tmp_path / "preds"))
        assert len(frame) == section["limit"]
        assert set(frame["status"]) == {"ok"}, frame[["problem_id", "status"]]
