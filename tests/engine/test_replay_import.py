"""Replay imports of logs written by the real peer tools (inspect_ai 0.3.285 on its mockllm model,
lm-eval 0.4.13 against the loopback chat server), through the real predict and score stages,
graded by RIMO's recipe and checked against an independent exact-match computation."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.commands.audit.content import expected_fingerprint
from rimo_eval.errors import StageError
from rimo_eval.io.hashing import fingerprint, sha256_file
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N
from rimo_eval.score.stage import score
from tests.support.factories import p_item, predict_section, section, write_items
from tests.support.foreign_logs import (
    INSPECT_VERSION,
    LMEVAL_VERSION,
    Reply,
    write_inspect_log,
    write_lmeval_samples,
)
from tests.support.independent_grader import independent_gold, independent_metrics
from tests.support.paths import find_mirror

MIRROR = find_mirror()
ITEMS = 24  # RIMO-N items in the logs: small, CI time
BOOT = {"samples": 200, "seed": 1, "confidence": 0.95}
SCORE = section(ScoreParams, "score", bootstrap=BOOT)


def _upstream() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in
            (MIRROR / "RIMO-N.jsonl").read_text(encoding="utf-8").splitlines()]
    return rows[:ITEMS]


def _replies() -> list[Reply]:
    """Replies of five kinds, by position: boxed right, boxed wrong, the answer in words (no
    box: inspect's match() takes it, RIMO does not), two boxes (the last decides), and the
    box only in the reasoning (not an answer)."""
    gold_n, _ = independent_gold(MIRROR)
    out = []
    for i, row in enumerate(_upstream()):
        pid, gold = row["problem_id"], gold_n[row["problem_id"]]
        text, reasoning = {
            0: (f"Working...\nSo the answer is $\\boxed{{{gold}}}$.", "Let me think."),
            1: (f"The answer is \\boxed{{{gold}1}}.", None),
            2: (f"The answer is {gold}", None),
            3: (f"First \\boxed{{{gold}}}, no: \\boxed{{7{gold}}}", None),
            4: ("I could not finish.", f"maybe \\boxed{{{gold}}}"),
        }[i % 5]
        out.append(Reply(pid, row["problem"], gold, text, reasoning))
    return out


def _last_box(text: str) -> str:
    """Independent extraction: the last \\boxed{...} whose content has no braces."""
    found = re.findall(r"\\boxed\{([^{}]*)\}", text)
    return found[-1].strip() if found else ""


@pytest.fixture(scope="session")
def inspect_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_inspect_log(tmp_path_factory.mktemp("inspect"), _replies())


@pytest.fixture(scope="session")
def lmeval_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lmeval_samples(tmp_path_factory.mktemp("lmeval"), _replies())


def _items(root: Path) -> Path:
    """The upstream RIMO-N rows of the logs as an items table (gold from the upstream CSV), and
    one RIMO-P item (the replay has none: missing)."""
    gold_n, _ = independent_gold(MIRROR)
    rows = []
    for row in _upstream():
        item = {"track": TRACK_N, "problem_id": row["problem_id"], "problem": row["problem"],
                "domain": "algebra", "number_of_parts": 1, "gradable": True,
                "ungradable_reason": None, "solution": "", "answer": gold_n[row["problem_id"]]}
        rows.append({**item, "content_hash": fingerprint(item)})
    write_items(root / "items", rows, [p_item("2001g1", ["g1", "g2"])])
    return root / "items"


def _run(root: Path, replay: dict[str, Any], allow_errors: float = 0.05) -> dict[str, Any]:
    items = _items(root)
    cfg = {"backend": "replay", "replay": replay, "allow_errors": allow_errors}
    predict(predict_section(cfg), items, root / "preds")
    return score(SCORE, items, root / "preds", root / "scores",
                 root / "metrics.json", root / "plots")


@pytest.mark.parametrize("tool", ["inspect_ai", "lm_eval"])
def test_real_log_scores_as_the_independent_grader(tool: str, inspect_log: Path,
                                                   lmeval_file: Path, tmp_path: Path) -> None:
    log = inspect_log if tool == "inspect_ai" else lmeval_file
    local = tmp_path / log.name
    for path in log.parent.iterdir():  # lm-eval: its results file beside, which has its version
        shutil.copy(path, tmp_path / path.name)
    metrics = _run(tmp_path, {"path": str(local)})
    replies = _replies()
    gold_n = {r.problem_id: r.gold for r in replies}
    want = independent_metrics(gold_n, {"2001g1": ["g1", "g2"]},
                               {r.problem_id: _last_box(r.text) for r in replies}, {})
    assert metrics[TRACK_N]["accuracy"] == round(want["accuracy"], 6)  # metrics: 6 digits
    assert metrics[TRACK_N]["correct"] == round(want["accuracy"] * ITEMS)
    assert metrics[TRACK_N]["n"] == ITEMS and 0 < want["accuracy"] < 1
    preds = pd.read_parquet(predictions_path(TRACK_N, tmp_path / "preds")).set_index(
        "problem_id")
    # Provenance: the tool, its version and the file's hash, in the rows' backend params.
    params = json.loads(preds["backend_params"].iloc[0])
    version = INSPECT_VERSION if tool == "inspect_ai" else LMEVAL_VERSION
    assert params["sources"] == {local.as_posix(): {"tool": tool, "version": version,
                                                    "sha256": sha256_file(local)}}
    first = replies[0]
    assert preds.at[first.problem_id, "prediction"] == first.gold
    if tool == "inspect_ai":  # lm-eval's chat model logs no reasoning
        assert preds.at[first.problem_id, "reasoning"] == "Let me think."
        assert json.loads(preds.at[first.problem_id, "details"])["usage"]["prompt_tokens"] == 100
    # audit recomputes the fingerprint from the log: an edited log no longer matches.
    fp = preds["fingerprint"].iloc[0]
    cfg = predict_section(backend="replay", replay={"path": str(local)})
    assert expected_fingerprint(tmp_path, "replay", cfg) == fp
    local.write_bytes(log.read_bytes() + (b"\n" if tool == "lm_eval" else b"\0"))
    assert expected_fingerprint(tmp_path, "replay", cfg) != fp


def test_inspect_own_score_differs(inspect_log: Path) -> None:
    """The log's own headline (match()) is not what RIMO reports: it takes unboxed answers."""
    from rimo_eval.predictors.foreign_inspect import _header, _open

    archive, fh = _open(inspect_log)
    with fh, archive:
        header = _header(archive, fh, inspect_log)
    theirs = header["results"]["scores"][0]["metrics"]["accuracy"]["value"]
    replies = _replies()
    ours = sum(_last_box(r.text) == r.gold for r in replies) / len(replies)
    assert theirs > ours


def test_truncated_inspect_log(inspect_log: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.eval"
    cut.write_bytes(inspect_log.read_bytes()[: inspect_log.stat().st_size // 2])
    with pytest.raises(StageError, match=r"cut\.eval: rule replay\.inspect: not a whole zip"):
        _run(tmp_path, {"path": str(cut)})
    assert not (tmp_path / "preds").exists()


def test_log_of_another_benchmark(tmp_path: Path) -> None:
    other = [Reply("gsm8k_1", "Janet has 3 apples. How many?", "3", r"\boxed{3}"),
             Reply("gsm8k_2", "Tom has 5 pears. How many?", "5", r"\boxed{5}")]
    log = write_inspect_log(tmp_path / "gsm", other, task="gsm8k")
    with pytest.raises(StageError, match=r"rule replay\.match: none of its replies match a "
                                         r"RIMO item.*gsm8k_1"):
        _run(tmp_path, {"path": str(log)})
    assert not (tmp_path / "preds").exists()


def test_lmeval_results_file_is_not_samples(lmeval_file: Path, tmp_path: Path) -> None:
    (results,) = lmeval_file.parent.glob("results_*.json")
    with pytest.raises(StageError, match=r"results_.*rule replay\.lm_eval: this is lm-eval's "
                                         r"aggregate results file.*--log_samples"):
        _run(tmp_path, {"path": str(results)})


def test_reply_by_problem_text_and_duplicates(lmeval_file: Path, tmp_path: Path) -> None:
    """No problem_id in the docs: the problem text (whitespace aside) finds the item; the same
    item twice is an error naming both lines."""
    lines = [json.loads(line) for line in lmeval_file.read_text(encoding="utf-8").splitlines()]
    for rec in lines:
        del rec["doc"]["problem_id"]
        rec["doc"]["problem"] = "  " + re.sub(r"\s+", "\n ", rec["doc"]["problem"])
    by_text = tmp_path / "by_text.jsonl"
    by_text.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    metrics = _run(tmp_path / "a", {"path": str(by_text), "format": "lm_eval"})
    replies = _replies()
    assert metrics[TRACK_N]["correct"] == sum(_last_box(r.text) == r.gold for r in replies)
    twice = tmp_path / "twice.jsonl"
    twice.write_text("".join(json.dumps(r) + "\n" for r in [*lines, lines[0]]), encoding="utf-8")
    with pytest.raises(StageError, match=rf"twice\.jsonl:{len(lines) + 1}: rule "
                                         r"replay\.duplicate.*already given at .*twice\.jsonl:1"):
        _run(tmp_path / "b", {"path": str(twice), "format": "lm_eval"})


def test_error_reply_is_an_error_row(tmp_path: Path) -> None:
    """An EEE instance row whose sample ended in an error: status error, the file and line named;
    over the error budget the stage fails and writes nothing."""
    reply = _replies()[0]
    row = {"schema_version": "0.3.0", "evaluation_id": "e", "model_id": "m",
           "evaluation_name": "RIMO-N", "sample_id": reply.problem_id,
           "interaction_type": "single_turn", "input": {"raw": reply.problem, "reference": []},
           "output": None, "answer_attribution": [], "error": "timeout after 600 s",
           "evaluation": {"score": 0, "is_correct": False}}
    path = tmp_path / "eee.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(StageError, match="allow_errors"):
        _run(tmp_path, {"path": str(path)}, allow_errors=0)
    assert not (tmp_path / "preds").exists()
    items = _items(tmp_path)
    predict(predict_section(backend="replay", replay={"path": str(path)}, allow_errors=1), items,
            tmp_path / "preds")
    preds = pd.read_parquet(predictions_path(TRACK_N, tmp_path / "preds")).set_index(
        "problem_id")
    assert preds.at[reply.problem_id, "status"] == "error"
    assert preds.at[reply.problem_id, "error"] == f"{path}:1: timeout after 600 s"


def test_not_bare_prediction_is_flagged(tmp_path: Path) -> None:
    """A replay line whose prediction is a whole reply scores wrong and is flagged; the same
    text given as ``reply`` is read by the extraction and scores right."""
    replies = _replies()[:3]
    rows = [{"track": TRACK_N, "problem_id": replies[0].problem_id,
             "prediction": f"The answer is \\boxed{{{replies[0].gold}}}."},
            {"track": TRACK_N, "problem_id": replies[1].problem_id,
             "reply": f"The answer is \\boxed{{{replies[1].gold}}}."},
            {"track": TRACK_N, "problem_id": replies[2].problem_id, "prediction": replies[2].gold}]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    metrics = _run(tmp_path, {"path": str(path)})
    scores = pd.read_parquet(tmp_path / "scores/rimo_n.parquet").set_index("problem_id")
    assert [bool(scores.at[r.problem_id, "correct"]) for r in replies] == [False, True, True]
    assert [bool(scores.at[r.problem_id, "not_bare"]) for r in replies] == [True, False, False]
    assert metrics[TRACK_N]["diagnostics"]["not_bare"] == 1

