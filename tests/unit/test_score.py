"""Stage score: the benchmark's grading rules, metrics, intervals and guards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rimo_eval.artifacts.metrics_files import join, read_all
from rimo_eval.errors import StageError
from rimo_eval.io.hashing import sha256_file
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.grading import grade_n, grade_p_strict, leading_matches, match_parts
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.stage import score
from rimo_eval.stats import wilson
from tests.support.factories import (
    n_item,
    params,
    predict_section,
    section,
    small_benchmark,
    write_items,
)

BOOT = section(ScoreParams, "score", bootstrap={"samples": 200, "seed": 1, "confidence": 0.95})


def test_rimo_n_is_exact_match_after_strip_only() -> None:
    assert grade_n(" 12\n", "12")
    assert not grade_n("12.0", "12")
    assert not grade_n("+12", "12")
    assert not grade_n("\\boxed{12}", "12")
    assert not grade_n(None, "12")
    assert not grade_n("", "12")


def test_rimo_p_strict_rejects_empty_and_short_lists() -> None:
    gold = ["a", "b"]
    # The seed's all(zip(pred, gold)) passes an empty list; the benchmark's rule must not.
    assert all(zip([], gold, strict=False))
    assert not grade_p_strict([], gold)
    assert not grade_p_strict(["a"], gold)
    assert not grade_p_strict(["a", "b", "c"], gold)
    assert grade_p_strict([" a ", "b\n"], gold)
    assert not grade_p_strict([], [])


def test_prefix_counts_leading_matches_only() -> None:
    matched = match_parts(["a", "x", "c"], ["a", "b", "c"])
    assert matched == [True, False, True]
    assert leading_matches(matched) == 1
    assert leading_matches([False, True]) == 0
    assert match_parts(None, ["a"]) == [False]


def write_replay(path: Path, rows: list[tuple[str, str, object]]) -> Path:
    path.write_text("".join(json.dumps({"track": t, "problem_id": i, "prediction": p}) + "\n"
                            for t, i, p in rows))
    return path


@pytest.fixture
def scored(tmp_path: Path) -> tuple[Path, dict]:
    small_benchmark(tmp_path / "items")
    replay = write_replay(tmp_path / "r.jsonl", [
        (TRACK_N, "2001a1", " 12 "),      # right (strip)
        (TRACK_N, "2001a2", "-3.0"),      # wrong
        (TRACK_N, "2001c1", "7"),         # right
        # 2001c2 missing -> wrong, still in the denominator
        (TRACK_P, "2001a1", ["s1"]),                # strict, prefix 1/1
        (TRACK_P, "2001g1", ["g1", "nope"]),        # matched 1/2, prefix 1/2
        (TRACK_P, "2001n1", ["x", "n2", "n3"]),     # matched 2/3, prefix 0
        (TRACK_P, "2005p3", ["anything"]),          # ungradable: not scored
    ])
    predict(predict_section(backend="replay", replay={"path": str(replay)}), tmp_path / "items",
            tmp_path / "preds")
    metrics = score(BOOT, tmp_path / "items", tmp_path / "preds", tmp_path / "scores",
                    tmp_path / "metrics.json", tmp_path / "plots")
    return tmp_path, metrics


def test_metrics_by_hand(scored: tuple[Path, dict]) -> None:
    _, m = scored
    n, p = m[TRACK_N], m[TRACK_P]
    assert (n["accuracy"], n["n"], n["correct"], n["missing"]) == (0.5, 4, 2, 1)
    assert n["by_domain"] == {"algebra": 0.5, "combinatorics": 0.5}
    assert n["by_domain_n"] == {"algebra": 2, "combinatorics": 2}
    assert p["n"] == 3 and p["ungradable"] == 1 and p["sub_problems"] == 6
    assert p["strict"] == round(1 / 3, 6)
    assert p["sub_problem_accuracy"] == round(4 / 6, 6)
    assert p["prefix_score"] == round((1 + 0.5 + 0) / 3, 6)
    two = p["by_parts"]["2"]
    assert {k: two[k] for k in ("n", "strict", "sub_problem_accuracy", "prefix_score")} == {
        "n": 1, "strict": 0.0, "sub_problem_accuracy": 0.5, "prefix_score": 0.5}
    # Wilson for the proportions (0/1 of one item, 1/2 of a domain); for the prefix score (a
    # mean of fractions) Wilson's of the sum, 0.5 out of 1 (statsmodels: 0.054621, 0.945379),
    # not the point [0.5, 0.5] the bootstrap gave.
    assert (two["strict_ci_low"], two["strict_ci_high"]) == (0.0, 0.793451)
    assert (two["prefix_score_ci_low"], two["prefix_score_ci_high"]) == (0.054621, 0.945379)
    assert n["by_domain_ci"]["algebra"] == {"low": 0.094531, "high": 0.905469}
    assert n["ci"]["accuracy"] == {"low": 0.150039, "high": 0.849961}  # Wilson 2/4
    assert m["sample"] == {"evaluated": {TRACK_N: 4, TRACK_P: 4},
                           "total": {TRACK_N: 4, TRACK_P: 4}, "is_sample": False,
                           "limit": None, "seed": None}  # no params given: nothing recorded
    for ci in (n["ci"]["accuracy"], p["ci"]["strict"], p["ci"]["prefix_score"]):
        assert 0.0 <= ci["low"] <= ci["high"] <= 1.0


def test_sample_records_the_predict_limit_and_seed(scored: tuple[Path, dict]) -> None:
    """The report's sample banner reads these, so they must describe the run."""
    root, _ = scored
    run_params = params(predict={"backend": "oracle", "limit": 3, "sample_seed": 5})
    m = score(BOOT, root / "items", root / "preds", root / "scores", root / "metrics.json",
              root / "plots", params=run_params)
    assert (m["sample"]["limit"], m["sample"]["seed"]) == (3, 5)
    # On disk the spec is provenance (tests/test_score_leftovers.py); read_all joins it back.
    joined = read_all(root / "metrics.json", root / "breakdown.json", root / "provenance.json")
    assert joined["sample"] == m["sample"]


def test_metrics_file_holds_the_headline_first_and_points_to_its_provenance(
        scored: tuple[Path, dict]) -> None:
    """metrics.json: only what a user compares, in reading order; breakdowns and provenance in
    their own files, which join back into what score() returned."""
    root, m = scored
    on_disk = json.loads((root / "metrics.json").read_text(encoding="utf-8"))
    assert list(on_disk) == [TRACK_N, TRACK_P, "sample", "provenance"]
    assert list(on_disk[TRACK_N]) == ["accuracy", "accuracy_ci_low", "accuracy_ci_high", "n",
                                      "correct", "missing", "errors", "usage", "diagnostics"]
    assert list(on_disk[TRACK_P]) == [
        "prefix_score", "strict", "sub_problem_accuracy",
        "prefix_score_ci_low", "prefix_score_ci_high", "strict_ci_low", "strict_ci_high",
        "sub_problem_accuracy_ci_low", "sub_problem_accuracy_ci_high",
        "n", "ungradable", "missing", "errors", "usage", "diagnostics"]
    n, p = on_disk[TRACK_N], on_disk[TRACK_P]
    assert (n["accuracy"], n["n"], n["correct"], n["missing"]) == (0.5, 4, 2, 1)
    assert [n["accuracy_ci_low"], n["accuracy_ci_high"]] == [
        m[TRACK_N]["ci"]["accuracy"][k] for k in ("low", "high")]
    assert p["strict_ci_high"] == m[TRACK_P]["ci"]["strict"]["high"]
    # Nothing nested but the sample block, usage and diagnostics: every column of `dvc exp
    # show` is a number.
    breakdown = json.loads((root / "breakdown.json").read_text(encoding="utf-8"))
    year_lens = {"by_year_band", "year_trend"}  # descriptive: breakdowns (test_years.py)
    floor = {"baselines", "by_answer_type"}  # RIMO-N's floor, context (test_floors.py)
    assert set(breakdown[TRACK_N]) - {"by_domain", "by_domain_n", "by_domain_ci"} == \
        year_lens | floor
    assert {k: v for k, v in breakdown[TRACK_N].items() if k not in year_lens | floor} == {
        "by_domain": {"algebra": 0.5, "combinatorics": 0.5},
                                  "by_domain_n": {"algebra": 2, "combinatorics": 2},
                                  "by_domain_ci": {d: {"low": 0.094531, "high": 0.905469}
                                                   for d in ("algebra", "combinatorics")}}
    assert set(breakdown[TRACK_P]) == {"sub_problems", "by_parts", *year_lens}
    assert breakdown[TRACK_P]["sub_problems"] == 6
    prov_file = root / "provenance.json"
    assert on_disk["provenance"] == ["reports/provenance.json", sha256_file(prov_file)]
    assert json.loads(prov_file.read_text(encoding="utf-8")) == m["provenance"]
    assert "provenance" not in breakdown and "by_domain" not in json.dumps(on_disk)
    assert join(on_disk, breakdown, m["provenance"]) == m


def test_join_reads_a_metrics_file_from_before_the_split() -> None:
    """compare reads old revisions: their nested ci block and provenance are kept as they are."""
    old = {TRACK_N: {"accuracy": 0.5, "n": 2, "ci": {"accuracy": {"low": 0.0, "high": 1.0}},
                     "by_domain": {"algebra": 0.5}},
           "provenance": {"version": 1}}
    assert join(old) == old


def test_outputs_are_written_and_stable(scored: tuple[Path, dict]) -> None:
    root, _ = scored
    first = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and "preds" not in p.parts
             and p.suffix != ".jsonl" and "items" not in p.parts}
    assert {p.name for p in first} >= {"metrics.json", "breakdown.json", "provenance.json",
                                       "rimo_n.parquet", "rimo_p.parquet",
                                       "rimo_n_by_domain.csv", "rimo_p_by_parts.csv"}
    score(BOOT, root / "items", root / "preds", root / "scores", root / "metrics.json",
          root / "plots")
    assert {p: p.read_bytes() for p in first} == first
    assert (root / "plots/rimo_n_by_domain.csv").read_text().splitlines() == [
        "domain,accuracy,accuracy_ci_low,accuracy_ci_high,n",
        "algebra,0.5,0.094531,0.905469,2", "combinatorics,0.5,0.094531,0.905469,2"]


def test_predictions_for_changed_items_are_refused(tmp_path: Path) -> None:
    write_items(tmp_path / "items", [n_item("2001a1", "1")], [])
    predict(predict_section({"backend": "oracle"}), tmp_path / "items", tmp_path / "preds")
    write_items(tmp_path / "items", [n_item("2001a1", "2")], [])
    with pytest.raises(StageError, match="rerun the predict stage"):
        score(BOOT, tmp_path / "items", tmp_path / "preds", tmp_path / "scores",
              tmp_path / "m.json", tmp_path / "plots")
    assert not (tmp_path / "m.json").exists()


def test_unknown_status_in_predictions_is_refused(tmp_path: Path) -> None:
    import pandas as pd

    from rimo_eval.artifacts.predictions import predictions_path
    write_items(tmp_path / "items", [n_item("2001a1", "1")], [])
    predict(predict_section({"backend": "oracle"}), tmp_path / "items", tmp_path / "preds")
    path = predictions_path(TRACK_N, tmp_path / "preds")
    df = pd.read_parquet(path)
    df.loc[0, "status"] = "maybe"
    df.to_parquet(path)
    with pytest.raises(StageError, match="unknown status"):
        score(BOOT, tmp_path / "items", tmp_path / "preds", tmp_path / "scores",
              tmp_path / "m.json", tmp_path / "plots")


def test_tables_from_two_predict_runs_are_refused(tmp_path: Path) -> None:
    import shutil

    from rimo_eval.artifacts.predictions import predictions_path
    small_benchmark(tmp_path / "items")
    predict(predict_section({"backend": "oracle"}), tmp_path / "items", tmp_path / "a")
    predict(predict_section({"backend": "constant"}), tmp_path / "items", tmp_path / "b")
    shutil.copyfile(predictions_path(TRACK_P, tmp_path / "b"),
                    predictions_path(TRACK_P, tmp_path / "a"))
    with pytest.raises(StageError, match="more than one predict run"):
        score(BOOT, tmp_path / "items", tmp_path / "a", tmp_path / "scores",
              tmp_path / "m.json", tmp_path / "plots")


def test_an_all_wrong_rimo_p_sample_has_no_point_interval(tmp_path: Path) -> None:
    """Issue 45 §3: a 4-item RIMO-P run with every part wrong printed ``prefix score 0.0% 95%
    [0.0%, 0.0%]`` (the percentile bootstrap of all zeros); its interval is now Wilson's of the
    sum, as wide as strict's, whose items are the same."""
    small_benchmark(tmp_path / "items")
    predict(predict_section(backend="constant", constant={"answer": "0", "solution": "wrong"}),
            tmp_path / "items", tmp_path / "preds")
    m = score(BOOT, tmp_path / "items", tmp_path / "preds", tmp_path / "scores",
              tmp_path / "metrics.json", tmp_path / "plots")
    p = m[TRACK_P]
    assert p["prefix_score"] == p["sub_problem_accuracy"] == p["strict"] == 0.0
    assert p["ci"]["prefix_score"] == p["ci"]["strict"] == wilson(0, p["n"], 0.95)
    assert p["ci"]["prefix_score"]["high"] > 0.4
    # Parts of unequal counts weigh the items unequally: fewer effective items, wider.
    sub = p["ci"]["sub_problem_accuracy"]
    assert sub["low"] == 0.0 and sub["high"] >= p["ci"]["prefix_score"]["high"]
