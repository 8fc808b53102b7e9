"""Repeated samples: k predictions per item, graded each, summarised as mean@k, pass@k, maj@k.

The metrics of a k = 4 replay over the real 791 items are checked against a computation written
here from the raw JSONL and the upstream mirror, sharing no project code; a k = 1 replay must
give exactly the single-sample metrics.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.errors import StageError
from rimo_eval.params.config import ScoreParams
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.score.samples import majority, pass_at, usage
from rimo_eval.score.stage import score
from rimo_eval.stats import wilson
from rimo_eval.validate.stage import run as validate_run
from tests.support.factories import params, predict_section, section, small_benchmark
from tests.support.independent_grader import independent_gold, independent_metrics
from tests.support.old_code import extract_old_package, run_old_code
from tests.support.paths import REPO_ROOT

K = 4
BOOT = {"samples": 200, "seed": 0, "confidence": 0.95}
# Per-item patterns of the k samples, cycled over the items. R right, S right with spaces,
# W / V two different wrong answers, E an empty extraction, X no line in the replay (missing).
PATTERNS_N = [
    "RRRR", "WWWW", "RWWX", "VRVR",  # VRVR: a 2-2 tie goes to the earliest answer (wrong)
    "RSWW",  # R and S are one answer after strip: 2-2 tie, R first: right
    "EERW",  # an empty extraction never wins, even with two votes
    "EEEW", "EEEE", "XXXR", "WRXX",
]
# R all parts right, H only the first right, F only the first wrong, E no parts, T one part short.
PATTERNS_P = ["RRRR", "HRXF", "FFFF", "XXXX", "EHRT", "TTHH", "RXXX"]


def n_value(code: str, gold: str) -> str | None:
    return {"R": gold, "S": f"  {gold}\n", "W": gold + "0", "V": gold + "1", "E": "",
            "X": None}[code]


def p_value(code: str, gold: list[str]) -> list[str] | None:
    wrong = ["wrong"] * len(gold)
    return {"R": list(gold), "H": [gold[0], *wrong[1:]], "F": ["wrong", *gold[1:]], "E": [],
            "T": list(gold[:-1]), "X": None}[code]


@pytest.fixture(scope="module")
def real_items(tmp_path_factory: pytest.TempPathFactory, mirror_dir: Path) -> Path:
    """The real item tables, built by the validate stage from the upstream mirror."""
    root = tmp_path_factory.mktemp("items")
    validate_run(params(validate={"errata": str(REPO_ROOT / "data/errata.yaml")}),
                 raw_dir=mirror_dir, items_dir=root / "items", report_path=root / "v.json")
    return root / "items"


def replay_k(path: Path, gold_n: dict[str, str], gold_p: dict[str, list[str]]
             ) -> tuple[dict[str, list[str | None]], dict[str, list[list[str] | None]]]:
    """Write the k = 4 replay (samples in a scrambled order); return what each sample holds."""
    want_n = {pid: [n_value(PATTERNS_N[i % len(PATTERNS_N)][j], g) for j in range(K)]
              for i, (pid, g) in enumerate(sorted(gold_n.items()))}
    want_p = {pid: [p_value(PATTERNS_P[i % len(PATTERNS_P)][j], g) for j in range(K)]
              for i, (pid, g) in enumerate(sorted(gold_p.items()))}
    lines = []
    for j in (2, 0, 3, 1):
        for track, want in ((TRACK_N, want_n), (TRACK_P, want_p)):
            for pid, values in want.items():
                if values[j] is not None:
                    rec = {"track": track, "problem_id": pid, "prediction": values[j]}
                    if j or pid[-1] in "02468":  # sample 0 sometimes implicit, sometimes given
                        rec["sample"] = j
                    lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return want_n, want_p


def independent_k(gold_n: dict[str, str], gold_p: dict[str, list[str]],
                  want_n: dict[str, list[str | None]],
                  want_p: dict[str, list[list[str] | None]]) -> dict[str, Any]:
    """The k-sample metrics from their definitions: pass@j by enumerating every j-subset of the
    samples, maj@k by counting, mean@k as the mean of k single-sample accuracies."""
    right = {pid: [v is not None and v.strip() == gold_n[pid] for v in vals]
             for pid, vals in want_n.items()}
    per_sample = [sum(r[j] for r in right.values()) / len(gold_n) for j in range(K)]
    out: dict[str, Any] = {"accuracy": statistics.fmean(per_sample),
                           "std": statistics.pstdev(per_sample)}
    for j in range(1, K + 1):
        out[f"pass@{j}"] = statistics.fmean(
            statistics.fmean(any(r[s] for s in subset) for subset in combinations(range(K), j))
            for r in right.values())
    maj = 0
    for pid, vals in want_n.items():
        votes = Counter(v.strip() for v in vals if v is not None and v.strip())
        if votes:
            top = max(votes.values())
            first = next(v.strip() for v in vals if v and v.strip() and votes[v.strip()] == top)
            maj += first == gold_n[pid]
    out["maj"] = maj / len(gold_n)
    strict = [[0.0] * K for _ in gold_p]
    matched = [0] * K
    prefix = [0.0] * K
    for i, (pid, gold) in enumerate(gold_p.items()):
        for j in range(K):
            pred = want_p[pid][j] or []
            ok = [k < len(pred) and pred[k].strip() == gold[k] for k in range(len(gold))]
            strict[i][j] = float(len(pred) == len(gold) and all(ok))
            matched[j] += sum(ok)
            prefix[j] += next((k for k, v in enumerate(ok) if not v), len(ok)) / len(gold)
    parts = sum(len(g) for g in gold_p.values())
    out["strict"] = statistics.fmean(sum(s[j] for s in strict) / len(gold_p) for j in range(K))
    out["sub"] = statistics.fmean(m / parts for m in matched)
    out["prefix"] = statistics.fmean(p / len(gold_p) for p in prefix)
    out["pass_strict"] = sum(any(s) for s in strict) / len(gold_p)
    return out


def test_k4_metrics_match_an_independent_computation(tmp_path: Path, real_items: Path,
                                                     mirror_dir: Path) -> None:
    gold_n, gold_p = independent_gold(mirror_dir)
    want_n, want_p = replay_k(tmp_path / "k4.jsonl", gold_n, gold_p)
    predict(predict_section(backend="replay", samples=K,
                            replay={"path": str(tmp_path / "k4.jsonl")}),
            real_items, tmp_path / "preds")
    frame = pd.read_parquet(predictions_path(TRACK_N, tmp_path / "preds"))
    assert list(frame.columns[:3]) == ["track", "problem_id", "sample"]
    assert len(frame) == K * len(gold_n)
    assert list(zip(frame["problem_id"], frame["sample"], strict=True)) == sorted(
        (pid, j) for pid in gold_n for j in range(K))
    m = score(section(ScoreParams, "score", bootstrap=BOOT, pass_at=[1, 2, 3]), real_items,
              tmp_path / "preds", tmp_path / "scores", tmp_path / "metrics.json",
              tmp_path / "plots")
    want = independent_k(gold_n, gold_p, want_n, want_p)
    n, p = m[TRACK_N], m[TRACK_P]
    assert n["k"] == p["k"] == K
    assert n["mean_at_k"]["accuracy"] == pytest.approx(want["accuracy"], abs=1e-6)
    assert n["mean_at_k"]["std"] == pytest.approx(want["std"], abs=1e-6)
    assert n["mean_at_k"]["std"] > 0  # the patterns differ per sample
    for j in (1, 2, 3):
        assert n["pass_at"][str(j)] == pytest.approx(want[f"pass@{j}"], abs=1e-6)
    assert n["pass_at_k"] == pytest.approx(want["pass@4"], abs=1e-6)
    assert n["maj_at_k"] == pytest.approx(want["maj"], abs=1e-6)
    assert p["mean_at_k"]["strict"] == pytest.approx(want["strict"], abs=1e-6)
    assert p["mean_at_k"]["sub_problem_accuracy"] == pytest.approx(want["sub"], abs=1e-6)
    assert p["mean_at_k"]["prefix_score"] == pytest.approx(want["prefix"], abs=1e-6)
    assert p["pass_at_k"] == pytest.approx(want["pass_strict"], abs=1e-6)
    # The primary keys stay on sample 0 (and a missing sample 0 is wrong there too).
    first_n = {pid: v[0] for pid, v in want_n.items() if v[0] is not None}
    first_p = {pid: v[0] for pid, v in want_p.items() if v[0] is not None}
    base = independent_metrics(gold_n, gold_p, first_n, first_p)
    assert n["accuracy"] == pytest.approx(base["accuracy"], abs=1e-6)
    assert p["strict"] == pytest.approx(base["strict"], abs=1e-6)
    assert m["sample"]["evaluated"] == {TRACK_N: len(gold_n), TRACK_P: 456}
    # Intervals resample items (their k samples together) around each k-sample value.
    for ci, value in ((n["ci"]["mean_at_k"]["accuracy"], n["mean_at_k"]["accuracy"]),
                      (n["ci"]["pass_at_k"], n["pass_at_k"]), (n["ci"]["maj_at_k"], n["maj_at_k"]),
                      (p["ci"]["mean_at_k"]["strict"], p["mean_at_k"]["strict"]),
                      (p["ci"]["pass_at_k"], p["pass_at_k"])):
        assert ci["low"] < value < ci["high"]
    assert n["usage"]["requests"] == 0 and "cost_usd" not in n["usage"]  # a replay sends none
    scores = pd.read_parquet(tmp_path / "scores/rimo_n.parquet")
    assert list(scores.columns[:3]) == ["track", "problem_id", "sample"]
    assert len(scores) == K * len(gold_n)


def _old_code_metrics(tmp_path: Path, replay: Path, items: Path) -> dict[str, Any] | None:
    """The metrics the code before repeated samples computes, run from its git commit."""
    old = extract_old_package(REPO_ROOT, "cd49a1c", tmp_path / "old")
    if old is None:
        return None
    code = ("import json, sys; from pathlib import Path; from stages.predict import predict; "
            "from stages.score.stage import score; o = Path(sys.argv[1]); "
            "predict({'backend': 'replay', 'replay': {'path': sys.argv[2]}}, Path(sys.argv[3]), "
            "o / 'preds'); score({'bootstrap': json.loads(sys.argv[4])}, Path(sys.argv[3]), "
            "o / 'preds', o / 'scores', o / 'm.json', o / 'plots')")
    run_old_code(old, code, str(old), str(replay), str(items), json.dumps(BOOT))
    return json.loads((old / "m.json").read_text())


def test_k1_replay_without_sample_fields_gives_todays_metrics(tmp_path: Path, real_items: Path,
                                                              mirror_dir: Path) -> None:
    gold_n, gold_p = independent_gold(mirror_dir)
    pred_n = {pid: g if i % 3 else g + "0" for i, (pid, g) in enumerate(sorted(gold_n.items()))
              if i % 7}
    pred_p = {pid: g if i % 2 else ["x", *g[1:]] for i, (pid, g) in enumerate(sorted(
        gold_p.items()))}
    replay = tmp_path / "k1.jsonl"
    replay.write_text("".join(
        json.dumps({"track": t, "problem_id": pid, "prediction": v}) + "\n"
        for t, d in ((TRACK_N, pred_n), (TRACK_P, pred_p)) for pid, v in d.items()))
    predict(predict_section({"backend": "replay", "replay": {"path": str(replay)}}), real_items,
            tmp_path / "preds")
    m = score(section(ScoreParams, "score", bootstrap=BOOT), real_items, tmp_path / "preds",
              tmp_path / "scores", tmp_path / "metrics.json", tmp_path / "plots")
    want = independent_metrics(gold_n, gold_p, pred_n, pred_p)
    assert m[TRACK_N]["accuracy"] == round(want["accuracy"], 6)
    assert m[TRACK_P]["strict"] == round(want["strict"], 6)
    assert m[TRACK_P]["sub_problem_accuracy"] == round(want["sub"], 6)
    assert m[TRACK_P]["prefix_score"] == round(want["prefix"], 6)
    for track in (TRACK_N, TRACK_P):
        assert not {"k", "mean_at_k", "pass_at_k", "pass_at", "maj_at_k"} & m[track].keys()
    old = _old_code_metrics(tmp_path, replay, real_items)
    if old is not None:
        # Every key the old code wrote keeps its value but the intervals of proportions, now
        # Wilson's (issue 19; tests/unit/test_statistics.py), and of means of fractions (issue
        # 45, below); usage, the diagnostics (RIMO-P's since issue 28) and the breakdown's
        # intervals are the new keys.
        # The year lens (issue 32) adds its breakdown: by_year_band and year_trend.
        years = {"by_year_band", "year_trend"}
        added = {TRACK_N: {"usage", "diagnostics", "by_domain_ci", *years,
                           "baselines", "by_answer_type"},  # RIMO-N's floor (issue 45)
                 TRACK_P: {"usage", "diagnostics", *years}}

        def points(track: str, block: dict[str, Any]) -> dict[str, Any]:
            out = {k: v for k, v in block.items() if k not in added[track] | {"ci"}}
            if "by_parts" in out:
                out["by_parts"] = {k: {m: x for m, x in v.items() if "_ci_" not in m}
                                   for k, v in out["by_parts"].items()}
            return out

        for track in (TRACK_N, TRACK_P):
            assert points(track, m[track]) == points(track, old[track])
            assert set(m[track]) - set(old[track]) == added[track]
        # The means of fractions' intervals are Wilson's of the sum since issue 45 (not the
        # old bootstrap): prefix score over the n gradable items, checked with statsmodels.
        n_p = m[TRACK_P]["n"]
        low, high = proportion_confint(want["prefix"] * n_p, n_p, alpha=1 - BOOT["confidence"],
                                       method="wilson")
        assert m[TRACK_P]["ci"]["prefix_score"] == pytest.approx({"low": low, "high": high},
                                                                 abs=1e-6)
        sub = m[TRACK_P]["ci"]["sub_problem_accuracy"]
        assert sub["low"] < m[TRACK_P]["sub_problem_accuracy"] < sub["high"]
        assert m[TRACK_N]["ci"]["accuracy"] == wilson(
            m[TRACK_N]["correct"], m[TRACK_N]["n"], BOOT["confidence"])
        # The sample block now also records the run's predict.limit and sample_seed.
        assert {k: v for k, v in m["sample"].items() if k not in ("limit", "seed")} \
            == old["sample"]


# --- the pieces --------------------------------------------------------------------------------


def test_pass_at_is_the_unbiased_estimator() -> None:
    for n in range(1, 7):
        for c in range(n + 1):
            for j in range(1, n + 1):
                subsets = list(combinations([True] * c + [False] * (n - c), j))
                assert pass_at(n, c, j) == pytest.approx(
                    sum(any(s) for s in subsets) / len(subsets))


def test_majority_ties_and_empty_answers() -> None:
    assert majority(["1", "2", "2", "1"]) == "1"  # tie: the earliest
    assert majority(["", "", "3"]) == "3"  # empty never wins
    assert majority([None, " 4 ", "4", "5"]) == "4"  # one answer after strip
    assert majority([None, "", "  "]) is None


def test_oracle_and_constant_give_k_identical_samples(tmp_path: Path) -> None:
    small_benchmark(tmp_path / "items")
    for backend in ("oracle", "constant"):
        predict(predict_section(backend=backend, samples=3), tmp_path / "items",
                tmp_path / backend)
        frame = pd.read_parquet(predictions_path(TRACK_P, tmp_path / backend))
        assert frame["sample"].tolist() == [0, 1, 2] * 4
        assert str(frame["sample"].dtype) == "int32"
        for _, group in frame.groupby("problem_id"):
            assert len({json.dumps(list(v)) for v in group["prediction"]}) == 1
    m = score(section(ScoreParams, "score", bootstrap=BOOT), tmp_path / "items",
              tmp_path / "oracle", tmp_path / "s", tmp_path / "m.json", tmp_path / "plots")
    assert m[TRACK_N]["k"] == 3 and m[TRACK_N]["mean_at_k"] == {"accuracy": 1.0, "std": 0.0}
    assert m[TRACK_N]["pass_at"] == {"1": 1.0} and m[TRACK_P]["pass_at_k"] == 1.0


def test_replay_with_fewer_than_k_samples_records_the_rest_missing(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    small_benchmark(tmp_path / "items")
    replay = tmp_path / "r.jsonl"
    replay.write_text(json.dumps({"track": TRACK_N, "problem_id": "2001a1", "prediction": "12",
                                  "sample": 1}) + "\n")
    predict(predict_section({"backend": "replay", "samples": 2, "replay": {"path": str(replay)}}),
            tmp_path / "items", tmp_path / "preds")
    frame = pd.read_parquet(predictions_path(TRACK_N, tmp_path / "preds"))
    status = dict(zip(zip(frame["problem_id"], frame["sample"], strict=True), frame["status"],
                      strict=True))
    assert status.pop(("2001a1", 1)) == "ok" and set(status.values()) == {"missing"}
    err = capfd.readouterr().err
    assert "covers 1 of the 8 requested items" in err and "other 7" in err
    m = score(section(ScoreParams, "score", bootstrap=BOOT, pass_at=[1, 2]), tmp_path / "items",
              tmp_path / "preds", tmp_path / "s", tmp_path / "m.json", tmp_path / "plots")
    n = m[TRACK_N]
    assert n["accuracy"] == 0.0 and n["mean_at_k"]["accuracy"] == 0.125
    assert n["pass_at"] == {"1": 0.125, "2": 0.25} and n["maj_at_k"] == 0.25
    with pytest.raises(StageError, match=r"score\.pass_at \[3\] outside 1\.\.2"):
        score(section(ScoreParams, "score", pass_at=[3]), tmp_path / "items", tmp_path / "preds",
              tmp_path / "s", tmp_path / "m.json", tmp_path / "plots")


def test_replay_folder_with_no_prediction_names_the_folder(tmp_path: Path) -> None:
    small_benchmark(tmp_path / "items")
    folder = tmp_path / "replays"
    folder.mkdir()
    (folder / "a.jsonl").write_text("\n\n")
    (folder / "b.csv").write_text("problem_id,llm_answer\n")
    with pytest.raises(StageError, match=rf"^{folder}: rule replay\.empty"):
        predict(predict_section(backend="replay", replay={"path": str(folder)}),
                tmp_path / "items", tmp_path / "preds")


def test_usage_sums_samples_and_parts_and_prices_tokens() -> None:
    preds = pd.DataFrame({
        "backend": ["openai"] * 3,
        "status": ["ok", "error", "ok"],
        "details": [
            json.dumps({"usage": {"prompt_tokens": 100, "completion_tokens": 50,
                                  "reasoning_tokens": 20}, "requests": 1,
                        "extraction": "truncated"}),
            json.dumps({"parts": [
                {"usage": {"prompt_tokens": 10, "completion_tokens": 5, "reasoning_tokens": 0},
                 "requests": 2},
                {"requests": 1, "error_kind": "context_length"}]}),
            "{}",
        ]})
    got = usage(preds, {"input": 2.0, "output": 10.0})
    assert got == {"requests": 4, "prompt_tokens": 110, "completion_tokens": 55,
                   "reasoning_tokens": 20, "truncated": 1, "context_errors": 1,
                   "cost_usd": round((110 * 2.0 + 55 * 10.0) / 1e6, 6)}
    assert "cost_usd" not in usage(preds, None)


def test_audit_recomputes_the_k_sample_metrics(tmp_path: Path) -> None:
    from rimo_eval.commands.audit.command import (
        Ledger,
        check_metrics,
        check_scores,
        recompute_metrics,
    )
    from rimo_eval.score.stage import SCORE_FILES
    small_benchmark(tmp_path / "items")
    replay = tmp_path / "r.jsonl"
    replay.write_text("".join(json.dumps({"track": t, "problem_id": i, "sample": j,
                                          "prediction": p}) + "\n" for t, i, j, p in [
        (TRACK_N, "2001a1", 0, "12"), (TRACK_N, "2001a1", 2, "12"), (TRACK_N, "2001c1", 1, "7"),
        (TRACK_P, "2001g1", 1, ["g1", "g2"])]))
    predict(predict_section({"backend": "replay", "samples": 3, "replay": {"path": str(replay)}}),
            tmp_path / "items", tmp_path / "preds")
    cfg = {"bootstrap": BOOT, "pass_at": [2]}
    m = score(section(ScoreParams, "score", cfg), tmp_path / "items", tmp_path / "preds",
              tmp_path / "scores", tmp_path / "m.json", tmp_path / "plots")
    m = json.loads(json.dumps(m))
    preds = {t: pd.read_parquet(predictions_path(t, tmp_path / "preds")) for t in (TRACK_N,
                                                                                 TRACK_P)}
    scores = {t: pd.read_parquet(tmp_path / "scores" / SCORE_FILES[t]) for t in (TRACK_N,
                                                                                TRACK_P)}
    fresh = recompute_metrics(scores, {TRACK_N: 4, TRACK_P: 4}, BOOT, preds,
                              score=section(ScoreParams, "score", cfg))
    ledger = Ledger()
    results = check_metrics(ledger, m, fresh, "m.json", {TRACK_N: "n", TRACK_P: "p"})
    assert not ledger.breaks
    assert {"RIMO-N.mean_at_k.accuracy", "RIMO-N.pass_at.2", "RIMO-P.pass_at_k",
            "RIMO-N.usage.requests"} <= {r.name for r in results}
    items = {t: pd.read_parquet(tmp_path / "items" / SCORE_FILES[t]) for t in (TRACK_N,
                                                                              TRACK_P)}
    edited = preds[TRACK_N].copy()
    edited.loc[(edited["problem_id"] == "2001a2") & (edited["sample"] == 2), ["prediction",
                                                                               "status"]] = \
        ["-3", "ok"]
    check_scores(ledger, TRACK_N, items[TRACK_N], edited, tmp_path / "scores" /
                 SCORE_FILES[TRACK_N], "s.parquet", "src")
    [broken] = ledger.breaks
    assert "1 rows differ (2001a2#2)" in broken.message


@pytest.mark.slow
def test_dvc_repro_with_four_samples_matches_the_independent_computation(
        tmp_path: Path, mirror_dir: Path, validated_base: Path) -> None:
    """The real `dvc repro`, predict.samples: 4, a replay with sample fields, the report too."""
    from tests.support.pipeline_repo import sh
    from tests.support.validated_repo import validated_copy
    gold_n, gold_p = independent_gold(mirror_dir)
    repo = validated_copy(validated_base, tmp_path / "repo", predict={
        "backend": "replay", "samples": K, "limit": None, "replay": {"path": "k4.jsonl"}})
    want_n, want_p = replay_k(repo / "k4.jsonl", gold_n, gold_p)
    sh(repo, "git", "add", "k4.jsonl")
    sh(repo, "git", "commit", "-qm", "k = 4 replay")
    sh(repo, "dvc", "repro")
    m = json.loads((repo / "reports/metrics.json").read_text())
    want = independent_k(gold_n, gold_p, want_n, want_p)
    assert m[TRACK_N]["k"] == K and m[TRACK_N]["pass_at"] == {"1": round(want["pass@1"], 6)}
    assert m[TRACK_N]["mean_at_k"]["accuracy"] == round(want["accuracy"], 6)
    assert m[TRACK_N]["maj_at_k"] == round(want["maj"], 6)
    assert m[TRACK_P]["pass_at_k"] == round(want["pass_strict"], 6)
    # The headline first, then the k-sample keys, each interval flat beside its metric.
    assert list(m[TRACK_N])[:8] == ["accuracy", "accuracy_ci_low", "accuracy_ci_high", "n",
                                    "correct", "missing", "errors", "k"]
    for block, name in ((m[TRACK_N], "pass_at_k"), (m[TRACK_N], "maj_at_k"),
                        (m[TRACK_N]["mean_at_k"], "accuracy"), (m[TRACK_P], "pass_at_k"),
                        (m[TRACK_P]["mean_at_k"], "prefix_score")):
        keys = list(block)
        at = keys.index(name)
        assert keys[at + 1:at + 3] == [f"{name}_ci_low", f"{name}_ci_high"]
        assert block[f"{name}_ci_low"] <= block[name] <= block[f"{name}_ci_high"]
    shown = json.loads(sh(repo, "dvc", "metrics", "show", "--json").stdout)
    assert "mean_at_k" in json.dumps(shown)
    page = (repo / "reports/report.html").read_text(encoding="utf-8")
    assert "Cost and budget" in page and "RIMO-N.maj_at_k" in page
    assert "Running stage" not in sh(repo, "dvc", "repro").stdout  # nothing to redo


@pytest.mark.parametrize("k", [0, -1, "2", 2.0, True, None])
def test_invalid_predict_samples_is_refused(tmp_path: Path, k: object) -> None:
    small_benchmark(tmp_path / "items")
    with pytest.raises(StageError, match=r"predict\.samples: Input should be"):
        predict(predict_section(backend="oracle", samples=k), tmp_path / "items",
                tmp_path / "preds")
    assert not (tmp_path / "preds").exists()
