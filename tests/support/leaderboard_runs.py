"""Runs for the leaderboard's tests: a temporary DVC repo of replay runs over the real 791 items,
and small runs built from score frames.

Five comparable full runs at k = 1 (the workspace and four experiments), two full runs at k = 4
and one 5-item sample, each made by the real ``dvc exp run -S predict.backend=replay ...`` up to
the score stage (the report notebook adds nothing the leaderboard reads). Models differ in
strength on a shared latent item difficulty, so the solved grid and the ranks have structure.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.commands.leaderboard.loading import Run
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.run.revision import Revision
from rimo_eval.score.samples import first_sample
from rimo_eval.score.trend import year_trend
from rimo_eval.score.years import year_blocks
from tests.support.pipeline_repo import sh
from tests.support.replay_files import repo_gold, write_jsonl
from tests.support.validated_repo import validated_copy

# name -> (strength, noise seed); the workspace run is "base".
MODELS = {"base": 0.30, "m-weak": 0.15, "m-mid": 0.45, "m-mid2": 0.47, "m-strong": 0.70}
K4, K4B = "m-k4", "m-k4b"
SAMPLE = "m-sample"


def unit(*parts: object) -> float:
    """A deterministic uniform number in [0, 1) from its parts."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def solves(name: str, pid: str, strength: float, sample: int = 0) -> bool:
    # A shared difficulty per item plus a model's own noise: stronger models solve supersets,
    # mostly.
    return unit("difficulty", pid) + 0.25 * (unit(name, pid, sample) - 0.5) < strength


def replay_rows(name: str, strength: float, gold_n: dict[str, str],
                gold_p: dict[str, list[str]], samples: int = 1) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for j in range(samples):
        for pid, ans in gold_n.items():
            if unit("missing", name, pid, j) < 0.02:
                continue  # recorded as missing
            pred = ans if solves(name, pid, strength, j) else ans + "1"
            rows.append({"track": TRACK_N, "problem_id": pid, "sample": j, "prediction": pred})
        for pid, sols in gold_p.items():
            right = len(sols) if solves(name, pid, strength, j) else int(
                unit("parts", name, pid, j) * len(sols))
            pred = [*sols[:right], *["wrong"] * (len(sols) - right)]
            rows.append({"track": TRACK_P, "problem_id": pid, "sample": j, "prediction": pred})
    return rows


def build(dest: Path, validated: Path) -> Path:
    """The repo: workspace = "base" (committed), experiments for every other run; from a copy
    of ``validated`` (``tests.support.validated_repo``: conftest's ``validated_base``)."""
    repo = validated_copy(validated, dest, predict={"backend": "replay", "limit": None,
                                                    "replay": {"path": "runs/base.jsonl"}})
    gold_n, gold_p = repo_gold(repo)
    for name, strength in MODELS.items():
        write_jsonl(repo / "runs" / f"{name}.jsonl", replay_rows(name, strength, gold_n, gold_p))
    write_jsonl(repo / "runs" / f"{K4}.jsonl", replay_rows(K4, 0.5, gold_n, gold_p, samples=4))
    write_jsonl(repo / "runs" / f"{K4B}.jsonl", replay_rows(K4B, 0.45, gold_n, gold_p, samples=4))
    sh(repo, "dvc", "repro", "score")
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", "base run and replays")
    for name in MODELS:
        if name != "base":
            sh(repo, "dvc", "exp", "run", "-n", name, "score", "-S",
               f"predict.replay.path=runs/{name}.jsonl")
    for name in (K4, K4B):
        sh(repo, "dvc", "exp", "run", "-n", name, "score", "-S",
           f"predict.replay.path=runs/{name}.jsonl", "-S", "predict.samples=4",
           "-S", "score.pass_at=[1,2]")
    # Each exp run starts from the workspace the last one left: every changed key is set.
    sh(repo, "dvc", "exp", "run", "-n", SAMPLE, "score", "-S", "predict.limit=5", "-S",
       "predict.replay.path=runs/base.jsonl", "-S", "predict.samples=1",
       "-S", "score.pass_at=[1]")
    # Back to the committed base run in the workspace (the last exp run left its outputs).
    sh(repo, "git", "reset", "-q", "--hard")
    sh(repo, "dvc", "checkout", "-f", "score")
    return repo


# --- runs without DVC: score frames in the score stage's schema, for the unit tests ----------


def dated_id(i: int, items: int) -> str:
    """The real ids' form (``1959p2`` ... ``2023p6``): item i of ``items`` gets a year from
    1959 to 2023 in order, so every band of the year lens holds items."""
    return f"{1959 + (2023 - 1959) * i // max(1, items - 1)}p{i}"


def frames(correct: np.ndarray, strict: np.ndarray, parts: np.ndarray, k: int = 1,
           dated: bool = False) -> dict[str, pd.DataFrame]:
    """Score frames: correct is items x k (RIMO-N), strict items x k (RIMO-P); ``dated`` gives
    the items year-dated ids, as the real ones are (the year lens reads the year from them)."""
    n_items, p_items = correct.shape[0], strict.shape[0]
    n_id = (lambda i: dated_id(i, n_items)) if dated else (lambda i: f"n{i:04d}")
    p_id = (lambda i: dated_id(i, p_items)) if dated else (lambda i: f"p{i:04d}")
    n = pd.DataFrame([{"problem_id": n_id(i), "sample": j, "domain": "algebra",
                       "item_hash": f"h{i}", "status": "ok", "gold": "1",
                       "prediction": "1" if correct[i, j] else str(j + 2),
                       "correct": bool(correct[i, j])}
                      for i in range(n_items) for j in range(k)])
    p = pd.DataFrame([{"problem_id": p_id(i), "sample": j, "item_hash": f"q{i}",
                       "number_of_parts": int(parts[i]), "gradable": True, "status": "ok",
                       "n_matched": int(parts[i]) if strict[i, j] else 0,
                       "strict": bool(strict[i, j]), "prefix_score": float(strict[i, j])}
                      for i in range(p_items) for j in range(k)])
    return {TRACK_N: n, TRACK_P: p}


def metrics_of(scores: dict[str, pd.DataFrame], k: int) -> dict[str, Any]:
    n0 = scores[TRACK_N][scores[TRACK_N]["sample"] == 0]
    p0 = scores[TRACK_P][scores[TRACK_P]["sample"] == 0]
    acc = round(float(n0["correct"].mean()), 6)
    strict = round(float(p0["strict"].mean()), 6)
    m: dict[str, Any] = {
        TRACK_N: {"accuracy": acc, "accuracy_ci_low": max(0.0, acc - 0.1),
                  "accuracy_ci_high": min(1.0, acc + 0.1), "n": len(n0), "errors": 0,
                  "missing": 0, "k": k},
        TRACK_P: {"prefix_score": strict, "strict": strict,
                  "sub_problem_accuracy": round(float(p0["n_matched"].sum()
                                                      / p0["number_of_parts"].sum()), 6),
                  "n": len(p0), "errors": 0, "missing": 0, "k": k}}
    if k > 1:
        m[TRACK_N]["mean_at_k"] = {"accuracy": round(float(scores[TRACK_N]["correct"].mean()),
                                                     6)}
        p = scores[TRACK_P]
        per_sample = p.groupby("sample")[["n_matched", "number_of_parts"]].sum()
        m[TRACK_P]["mean_at_k"] = {
            "strict": round(float(p["strict"].mean()), 6),
            "prefix_score": round(float(p["prefix_score"].mean()), 6),
            "sub_problem_accuracy": round(float((per_sample["n_matched"]
                                                 / per_sample["number_of_parts"]).mean()), 6)}
    return m


def year_breakdown(scores: dict[str, pd.DataFrame], confidence: float = 0.95
                   ) -> dict[str, Any]:
    """breakdown.json's year lens (``by_year_band``, ``year_trend``) of each track, by the score
    stage's own functions (rimo_eval.score.metrics.compute does the same)."""
    return {t: {**year_blocks(first_sample(df), t, confidence),
                "year_trend": year_trend(df, t, confidence)} for t, df in scores.items()}


def make_run(name: str, correct: np.ndarray, strict: np.ndarray, parts: np.ndarray, k: int = 1,
             years: bool = False) -> Run:
    """A run from score frames; ``years``: dated ids and the year breakdown a real run has."""
    scores = frames(correct, strict, parts, k, dated=years)
    breakdown = year_breakdown(scores) if years else {}
    run = Run(Revision(name, "experiment", "0" * 40), metrics_of(scores, k), breakdown, {},
              scores, {"predict": {"backend": "replay", "replay": {"path": f"{name}.jsonl"}}},
              model=f"replay {name}.jsonl", k=k, content=name)
    run.label = name
    return run


if __name__ == "__main__":  # build one by hand: python -m tests.support.leaderboard_runs DEST
    import sys

    from tests.support.paths import find_mirror
    from tests.support.validated_repo import build_validated

    top = Path(sys.argv[1])
    print(build(top / "repo", build_validated(top / "validated", find_mirror())))
