"""k samples per item: mean@k, pass@k (unbiased), maj@k, and token usage, over score frames.

Pure functions of the per-sample score tables (one row per (problem_id, sample)) and the
predictions tables. The primary metrics stay on sample 0 (see ``first_sample``); everything
here lives under its own keys so a k = 1 run keeps today's metrics.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rimo_eval.artifacts.numbers import rounded
from rimo_eval.artifacts.predictions import STATUS_ERROR
from rimo_eval.errors import ConfigError, StageError
from rimo_eval.params.chat import AnthropicParams, NativeChatParams, OpenAIParams
from rimo_eval.params.config import PredictParams, ScoreParams
from rimo_eval.params.prices import applied_price
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P


def with_sample(frame: pd.DataFrame) -> pd.DataFrame:
    """Tables written before the ``sample`` column existed hold one sample: sample 0."""
    if "sample" in frame.columns:
        return frame
    out = frame.copy()
    position = out.columns.get_loc("problem_id")
    assert isinstance(position, int)  # a unique column (get_loc gives a mask for duplicates)
    out.insert(position + 1, "sample", 0)
    return out


def sample_count(track: str, scores: pd.DataFrame) -> int:
    """k, checked: every item has exactly the samples 0..k-1 (predict fills in the missing)."""
    if scores.empty:
        return 1
    k = int(scores["sample"].max()) + 1
    per_item = scores.groupby("problem_id")["sample"].agg(lambda s: sorted(s.tolist()))
    bad = [pid for pid, got in per_item.items() if got != list(range(k))]
    if bad:
        raise StageError(f"{track} predictions: items {bad[:10]} do not have exactly samples "
                         f"0..{k - 1}: rerun the predict stage")
    return k


def first_sample(scores: pd.DataFrame) -> pd.DataFrame:
    return scores[scores["sample"] == 0].reset_index(drop=True)


def pass_at(n: int, c: int, j: int) -> float:
    """Chen et al. 2021: P(at least one of j draws without replacement from n samples, c of
    them right, is right) = 1 - C(n - c, j) / C(n, j)."""
    if n - c < j:
        return 1.0
    return 1.0 - math.comb(n - c, j) / math.comb(n, j)


def majority(answers: Sequence[Any]) -> str | None:
    """The most frequent non-empty answer (compared after strip, as the grader does); a tie
    goes to the answer seen first; no non-empty answer gives None."""
    counts: dict[str, int] = {}
    for a in answers:
        if isinstance(a, str) and a.strip():  # None, or NaN from a frame, is no answer
            counts[a.strip()] = counts.get(a.strip(), 0) + 1
    if not counts:
        return None
    top = max(counts.values())
    return next(a for a, c in counts.items() if c == top)  # dicts keep first-seen order


def pass_ks(cfg: ScoreParams, k: int) -> list[int]:
    """score.pass_at: the extra j of pass@j, each 1 <= j <= k (ScoreParams checks the type)."""
    js = cfg.pass_at
    bad = [j for j in js if not 1 <= j <= k]
    if bad:
        raise ConfigError(f"params.yaml: score.pass_at {bad} outside 1..{k} "
                          f"(predict.samples is {k})")
    return sorted(set(js))


def _matrix(scores: pd.DataFrame, col: str, k: int) -> np.ndarray:
    """items x samples, items sorted by problem_id: a sample's value or 0 when it failed."""
    wide = scores.pivot(index="problem_id", columns="sample", values=col).sort_index()
    return wide.reindex(columns=range(k)).fillna(0).to_numpy(dtype=float)


# The stage's own percentile bootstrap, with its params bound: (per-item numerator,
# per-item denominator or None) -> {"low", "high"}. Items are resampled with their k samples
# reduced to one per-item value first, which keeps each item's samples together.
Bootstrap = Callable[[np.ndarray, np.ndarray | None], dict[str, float | None]]


def metrics_n_samples(scores: pd.DataFrame, ci: Bootstrap, js: Sequence[int], k: int
                      ) -> dict[str, Any]:
    """RIMO-N k-sample keys. A missing or failed sample was graded wrong by score_n."""
    correct = _matrix(scores, "correct", k)
    n = len(correct)
    per_sample = correct.mean(axis=0) if n else np.zeros(k)
    right = correct.sum(axis=1).astype(int)
    by_item = scores.sort_values(["problem_id", "sample"]).groupby("problem_id", sort=True)
    maj = np.array([float(majority(g["prediction"].tolist()) == g["gold"].iloc[0].strip())
                    for _, g in by_item]) if n else np.zeros(0)
    pass_k = np.array([pass_at(k, int(c), k) for c in right])
    return {
        "k": k,
        "mean_at_k": {"accuracy": rounded(per_sample.mean()) if n else None,
                      "std": rounded(per_sample.std()) if n else None},
        "pass_at_k": rounded(pass_k.mean()) if n else None,
        "pass_at": {str(j): rounded(float(np.mean([pass_at(k, int(c), j) for c in right])))
                    if n else None for j in js},
        "maj_at_k": rounded(maj.mean()) if n else None,
        "ci": {"mean_at_k": {"accuracy": ci(correct.mean(axis=1), None)},
               "pass_at_k": ci(pass_k, None), "maj_at_k": ci(maj, None)},
    }


def metrics_p_samples(scores: pd.DataFrame, ci: Bootstrap, k: int) -> dict[str, Any]:
    """RIMO-P k-sample keys over gradable items; pass@k on strict."""
    graded = scores[scores["gradable"]]
    strict = _matrix(graded, "strict", k)
    matched = _matrix(graded, "n_matched", k)
    prefix = _matrix(graded, "prefix_score", k)
    parts = (graded[graded["sample"] == 0].sort_values("problem_id")["number_of_parts"]
             .to_numpy(dtype=float))
    n = len(strict)
    pass_k = (strict.sum(axis=1) > 0).astype(float)

    def mean(x: np.ndarray) -> float | None:
        return rounded(x.mean()) if n else None

    sub = rounded(matched.sum() / (parts.sum() * k)) if parts.sum() else None
    return {
        "k": k,
        "mean_at_k": {"strict": mean(strict), "sub_problem_accuracy": sub,
                      "prefix_score": mean(prefix)},
        "pass_at_k": mean(pass_k),
        "ci": {"mean_at_k": {"strict": ci(strict.mean(axis=1), None),
                             "sub_problem_accuracy": ci(matched.mean(axis=1), parts),
                             "prefix_score": ci(prefix.mean(axis=1), None)},
               "pass_at_k": ci(pass_k, None)},
    }


def add_sample_metrics(metrics: dict[str, Any], scores: dict[str, pd.DataFrame],
                       ci: Bootstrap, cfg: ScoreParams) -> None:
    """With k > 1, merge the k-sample keys into each track's block (ci nested under ci)."""
    k = max(sample_count(t, df) for t, df in scores.items())
    if k == 1:
        return
    extra = {TRACK_N: metrics_n_samples(scores[TRACK_N], ci, pass_ks(cfg, k), k),
             TRACK_P: metrics_p_samples(scores[TRACK_P], ci, k)}
    for track, block in extra.items():
        ci = block.pop("ci")
        metrics[track].update(block)
        metrics[track]["ci"].update(ci)


def extend_metrics(metrics: dict[str, Any], scores: dict[str, pd.DataFrame],
                   preds: dict[str, pd.DataFrame], ci: Bootstrap,
                   cfg: ScoreParams, predict: PredictParams | None) -> None:
    """Everything this module adds to metrics.json: the k-sample keys (k > 1) and each track's
    usage. One entry point, shared by the score stage and the audit's recomputation."""
    add_sample_metrics(metrics, scores, ci, cfg)
    for track, frame in preds.items():
        metrics[track]["usage"] = usage(frame, price(predict, frame))


# --- tokens and cost ---------------------------------------------------------------------------

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "reasoning_tokens")


def _int(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def sample_usage(details: dict[str, Any], status: str) -> dict[str, int]:
    """One sample's usage from its details; RIMO-P parts are summed when no total is given."""
    parts = [p for p in details.get("parts") or [] if isinstance(p, dict)]
    usage = details.get("usage")
    if isinstance(usage, dict):
        tokens = {key: _int(usage.get(key)) for key in USAGE_KEYS}
    else:
        tokens = {key: sum(_int((p.get("usage") or {}).get(key)) for p in parts)
                  for key in USAGE_KEYS}
    requests = details.get("requests")
    if not isinstance(requests, int) or isinstance(requests, bool):
        requests = sum(_int(p.get("requests")) for p in parts)
    pieces = [details, *parts]
    # Cut off by the length limit, whatever was extracted (older details: extraction only).
    truncated = any(p.get("finish_reason") == "length" or p.get("extraction") == "truncated"
                    for p in pieces)
    context = status == STATUS_ERROR and any(p.get("error_kind") == "context_length"
                                             for p in pieces)
    return {"requests": requests, **tokens, "truncated": int(truncated),
            "context_errors": int(context)}


# The backends with a price_per_mtok key; each counts thinking inside completion_tokens.
PRICED_BACKENDS = ("openai", "anthropic", "gemini")


def price(predict: PredictParams | None, preds: pd.DataFrame) -> dict[str, float] | None:
    """predict.<backend>.price_per_mtok, for predictions one priced backend (openai,
    anthropic, gemini) made, at the batch price where its batch path is on (openai,
    anthropic); None without a predict section."""
    backends = set() if preds.empty else set(preds["backend"])
    if predict is None or len(backends) != 1 or not backends <= set(PRICED_BACKENDS):
        return None
    section = predict.backend_config(backends.pop())
    if not isinstance(section, OpenAIParams | NativeChatParams):
        return None  # the backend's section is absent
    batch = section.batch if isinstance(section, OpenAIParams | AnthropicParams) else None
    return applied_price(section.price_per_mtok, batch)


def usage(preds: pd.DataFrame, per_mtok: dict[str, float] | None) -> dict[str, Any]:
    """Deterministic usage of one track, summed over every sample of the predictions table."""
    total: dict[str, Any] = dict.fromkeys(
        ("requests", *USAGE_KEYS, "truncated", "context_errors"), 0)
    for details, status in zip(preds["details"], preds["status"], strict=True):
        parsed = json.loads(details) if isinstance(details, str) and details else {}
        for key, value in sample_usage(parsed if isinstance(parsed, dict) else {},
                                       str(status)).items():
            total[key] += value
    if per_mtok is not None:
        # Reasoning tokens are billed inside completion_tokens, so they are not added again.
        factor = per_mtok.get("batch_discount", 1.0)
        total["cost_usd"] = rounded(factor * (total["prompt_tokens"] * per_mtok["input"]
                                              + total["completion_tokens"] * per_mtok["output"])
                                    / 1e6)
        if "batch_discount" in per_mtok:  # says which price applied: the batch one
            total["cost_batch_discount"] = factor
    return total
