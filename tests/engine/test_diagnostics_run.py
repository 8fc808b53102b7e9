"""Score's diagnostic flags through the real engine (the openai backend against the loopback
chat server), predict and score: the scores table, ``RIMO-N.diagnostics``, k samples, older
scores, and exact match unchanged against the code before the flags."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.io.hashing import fingerprint
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.diagnostics import ENGINE_FLAGS, FLAGS_N, FLAGS_P, TEXT_FLAGS_N
from rimo_eval.score.metrics import compute
from rimo_eval.score.stage import score
from tests.support.chat_server import ChatServer
from tests.support.factories import p_item, predict_section, section, write_items
from tests.support.old_code import extract_old_package, run_old_code
from tests.support.openai_backend import KEY_ENV, SECRET, make_config
from tests.support.paths import REPO_ROOT

BOOT = {"samples": 200, "seed": 1, "confidence": 0.95}
SCORE = section(ScoreParams, "score", bootstrap=BOOT)
BASE_COMMIT = "89ef707"  # main before the diagnostics: its exact-match metrics are the reference


# --- through the real engine, predict and score --------------------------------------------------
REPLIES = {  # problem id -> (reply text, extra directive)
    "2001a1": (r"Put the answer inside \boxed{}. The answer is", "[[cut]]"),  # echo, cut off
    "2001a2": (r"So the answer is \boxed{12}.", ""),
    "2001a3": (r"The answer is \boxed{\text{12}} (or 12).", ""),
    "2001a4": (r"Maybe \boxed{3}, or rather \boxed{4}, since 12", "[[cut]]"),
    "2001a5": (r"I think it is 12, done.", ""),
}


def _n_row(pid: str, answer: str, directive: str) -> dict[str, Any]:
    row = {"track": TRACK_N, "problem_id": pid, "problem": f"Problem {pid}? {directive}",
           "domain": "algebra", "number_of_parts": 1, "gradable": True,
           "ungradable_reason": None, "solution": "Because.", "answer": answer}
    return {**row, "content_hash": fingerprint(row)}


@pytest.fixture
def chat_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Five scripted RIMO-N replies (gold 12) and one RIMO-P item, predicted by the openai
    backend from the loopback server and scored."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    server = ChatServer(hang_s=60.0)

    def responder(body: dict[str, Any], prompt: str) -> str | None:
        return next((text for pid, (text, _) in REPLIES.items() if f"Problem {pid}?" in prompt),
                    None)

    server.responder = responder
    server.start()
    try:
        write_items(tmp_path / "items",
                    [_n_row(pid, "12", d) for pid, (_t, d) in REPLIES.items()],
                    [p_item("2001g1", ["g1", "g2"])])
        cfg = {"backend": "openai", "openai": make_config(server, tmp_path)}
        predict(predict_section(cfg), tmp_path / "items", tmp_path / "preds")
        metrics = score(SCORE, tmp_path / "items", tmp_path / "preds",
                        tmp_path / "scores", tmp_path / "metrics.json", tmp_path / "plots")
        yield {"root": tmp_path, "metrics": metrics, "server": server, "cfg": cfg}
    finally:
        server.stop()


def test_flags_in_the_scores_table(chat_run: dict[str, Any]) -> None:
    root = chat_run["root"]
    scores = pd.read_parquet(root / "scores/rimo_n.parquet").set_index("problem_id")
    flags = {pid: {f for f in FLAGS_N if bool(scores.at[pid, f])} for pid in REPLIES}
    assert flags == {
        "2001a1": {"empty_box", "truncated"},
        "2001a2": {"lenient_match"},
        "2001a3": {"gold_in_text", "lenient_match"},
        "2001a4": {"multiple_boxes", "truncated", "gold_in_text"},
        "2001a5": {"no_box", "gold_in_text"},
    }
    assert scores["correct"].tolist() == [False, True, False, False, False]
    assert scores.at["2001a1", "prediction"] == ""  # an empty box stays "" for exact match
    for f in FLAGS_N:
        assert scores[f].dtype == bool
    preds = pd.read_parquet(predictions_path(TRACK_N, root / "preds")).set_index("problem_id")
    kinds = {pid: json.loads(preds.at[pid, "details"])["extraction"] for pid in REPLIES}
    assert kinds == {"2001a1": "empty_box", "2001a2": "boxed", "2001a3": "boxed",
                     "2001a4": "boxed", "2001a5": "none"}
    p_scores = pd.read_parquet(root / "scores/rimo_p.parquet")
    assert p_scores["truncated"].tolist() == [False]


def test_diagnostics_block_in_metrics_json(chat_run: dict[str, Any]) -> None:
    on_disk = json.loads((chat_run["root"] / "metrics.json").read_text(encoding="utf-8"))
    n = on_disk[TRACK_N]
    assert n["accuracy"] == 0.2
    assert n["diagnostics"] == {
        "no_box": 1, "empty_box": 1, "multiple_boxes": 1, "truncated": 2, "gold_in_text": 3,
        "not_bare": 0, "lenient_match": 2, "unicode_repaired": 0, "redacted": 0, "usage_dropped": 0,
        "lenient_accuracy": 0.4,
        "lenient_accuracy_ci_low": n["diagnostics"]["lenient_accuracy_ci_low"],
        "lenient_accuracy_ci_high": n["diagnostics"]["lenient_accuracy_ci_high"]}
    assert 0.0 <= n["diagnostics"]["lenient_accuracy_ci_low"] <= 0.4 \
        <= n["diagnostics"]["lenient_accuracy_ci_high"] <= 1.0
    # A proportion of items: Wilson's interval of 2/5 (rimo_eval.stats.wilson).
    assert (n["diagnostics"]["lenient_accuracy_ci_low"],
            n["diagnostics"]["lenient_accuracy_ci_high"]) == (0.117621, 0.769276)
    # Both cut-off replies count as truncated, the boxed one too (it used to read 1).
    assert n["usage"]["truncated"] == 2
    assert list(n)[:7] == ["accuracy", "accuracy_ci_low", "accuracy_ci_high", "n", "correct",
                           "missing", "errors"]


def test_scores_from_before_the_flags_have_no_diagnostics(chat_run: dict[str, Any]) -> None:
    root = chat_run["root"]
    scores = {t: pd.read_parquet(root / f"scores/{n}.parquet")
              for t, n in ((TRACK_N, "rimo_n"), (TRACK_P, "rimo_p"))}
    old = {TRACK_N: scores[TRACK_N].drop(columns=list(FLAGS_N)),
           TRACK_P: scores[TRACK_P].drop(columns=list(FLAGS_P))}
    fresh = compute(scores, {TRACK_N: 5, TRACK_P: 1}, BOOT)
    legacy = compute(old, {TRACK_N: 5, TRACK_P: 1}, BOOT)
    assert "diagnostics" in fresh[TRACK_N] and "diagnostics" not in legacy[TRACK_N]
    assert "diagnostics" not in legacy[TRACK_N]["ci"]
    assert "diagnostics" in fresh[TRACK_P] and "diagnostics" not in legacy[TRACK_P]
    fresh[TRACK_N].pop("diagnostics")
    fresh[TRACK_N]["ci"].pop("diagnostics")
    fresh[TRACK_P].pop("diagnostics")
    assert fresh == legacy
    # Scores from before the engine's flags (unicode_repaired, redacted): the text flags only.
    between = {TRACK_N: scores[TRACK_N].drop(columns=list(ENGINE_FLAGS)),
               TRACK_P: scores[TRACK_P].drop(columns=list(ENGINE_FLAGS))}
    middle = compute(between, {TRACK_N: 5, TRACK_P: 1}, BOOT)
    assert set(middle[TRACK_N]["diagnostics"]) == set(TEXT_FLAGS_N) | {"lenient_accuracy"}
    assert "diagnostics" not in middle[TRACK_P]


# --- exact match unchanged -----------------------------------------------------------------------
def _base_code(tmp_path: Path) -> Path | None:
    return extract_old_package(REPO_ROOT, BASE_COMMIT, tmp_path / "base")


_run_base = run_old_code


_BASE_SCORE = ("import json, sys; from pathlib import Path; from stages.score.stage import score; "
               "o = Path(sys.argv[1]); score({'bootstrap': json.loads(sys.argv[2])}, "
               "Path(sys.argv[3]), Path(sys.argv[4]), o / 'scores', o / 'metrics.json', "
               "o / 'plots')")
_BASE_PREDICT = ("import json, sys; from pathlib import Path; from stages.predict import predict; "
                 "predict(json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))")


EXACT_MATCH_KEYS = {TRACK_N: ("accuracy", "n", "correct", "missing", "errors"),
                    TRACK_P: ("prefix_score", "strict", "sub_problem_accuracy", "n", "ungradable",
                              "missing", "errors")}


def _exact_match_view(metrics_file: Path) -> dict[str, Any]:
    """metrics.json's exact-match numbers (intervals aside: how they are computed is another
    branch's business), and the usage counters but the truncation count, now read from the
    finish reason."""
    view = json.loads(metrics_file.read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    for track, keys in EXACT_MATCH_KEYS.items():
        out[track] = {k: view[track][k] for k in keys}
        out[f"{track}.usage"] = {k: v for k, v in view[track]["usage"].items()
                                 if k != "truncated"}
    return out


def test_exact_match_metrics_unchanged_on_oracle_replay_and_chat_runs(
        chat_run: dict[str, Any], tmp_path: Path) -> None:
    old = _base_code(tmp_path)
    if old is None:
        pytest.skip(f"commit {BASE_COMMIT} is not in this clone")
    root = chat_run["root"]
    items = root / "items"
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(r) + "\n" for r in [
        {"track": TRACK_N, "problem_id": "2001a1", "prediction": ""},
        {"track": TRACK_N, "problem_id": "2001a2", "prediction": "12"},
        {"track": TRACK_N, "problem_id": "2001a3", "prediction": r"\text{12}"},
        {"track": TRACK_N, "problem_id": "2001a4", "prediction": "+12"},
        {"track": TRACK_P, "problem_id": "2001g1", "prediction": ["g1", "x"]}]))
    runs = {"oracle": {"backend": "oracle"},
            "replay": {"backend": "replay", "replay": {"path": str(replay)}}}
    for name, cfg in runs.items():
        predict(predict_section(cfg), items, tmp_path / name / "preds")
        score(SCORE, items, tmp_path / name / "preds", tmp_path / name,
              tmp_path / name / "metrics.json", tmp_path / name / "plots")
    # The chat run: the base code predicts from the same server (the same replies, a fresh
    # cache), then each code scores its own predictions.
    base_cfg = {**chat_run["cfg"], "openai": {**chat_run["cfg"]["openai"],
                                              "cache_dir": str(tmp_path / "base-cache")}}
    _run_base(old, _BASE_PREDICT, json.dumps(base_cfg), str(items),
              str(tmp_path / "chat-base" / "preds"))
    new_preds = pd.read_parquet(predictions_path(TRACK_N, root / "preds"))
    base_preds = pd.read_parquet(predictions_path(TRACK_N, tmp_path / "chat-base" / "preds"))
    assert new_preds["prediction"].tolist() == base_preds["prediction"].tolist()
    pairs = {"oracle": tmp_path / "oracle" / "preds", "replay": tmp_path / "replay" / "preds",
             "chat": tmp_path / "chat-base" / "preds"}
    for name, preds_dir in pairs.items():
        out = tmp_path / f"{name}-base-score"
        _run_base(old, _BASE_SCORE, str(out), json.dumps(BOOT), str(items), str(preds_dir))
        new_file = root / "metrics.json" if name == "chat" else tmp_path / name / "metrics.json"
        assert _exact_match_view(new_file) == _exact_match_view(out / "metrics.json"), name
    assert json.loads((tmp_path / "oracle" / "metrics.json").read_text())[TRACK_N][
        "accuracy"] == 1.0
    replay_n = json.loads((tmp_path / "replay" / "metrics.json").read_text())[TRACK_N]
    assert (replay_n["accuracy"], replay_n["diagnostics"]["lenient_accuracy"]) == (0.2, 0.6)


def test_k_samples_get_flags_per_row_and_counts_over_every_row(
        chat_run: dict[str, Any], tmp_path: Path) -> None:
    """k = 2: every (item, sample) row has its flags; the counts are over all 2 x 5 replies,
    lenient accuracy stays on sample 0 beside accuracy."""
    root = chat_run["root"]
    cfg = {**chat_run["cfg"], "samples": 2}
    predict(predict_section(cfg), root / "items", tmp_path / "preds")
    metrics = score(SCORE, root / "items", tmp_path / "preds", tmp_path / "scores",
                    tmp_path / "metrics.json", tmp_path / "plots")
    scores = pd.read_parquet(tmp_path / "scores/rimo_n.parquet")
    assert len(scores) == 10 and set(scores["sample"]) == {0, 1}
    # The scripted server answers both samples alike, so each flag doubles.
    first = chat_run["metrics"][TRACK_N]["diagnostics"]
    diag = metrics[TRACK_N]["diagnostics"]
    assert {f: diag[f] for f in FLAGS_N} == {f: 2 * first[f] for f in FLAGS_N}
    assert diag["lenient_accuracy"] == first["lenient_accuracy"] == 0.4
