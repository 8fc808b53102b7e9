"""compare of two runs over any item sets: every Δ and its interval are over the same items.

A property test on compare's plain functions (``compare_sides`` and the renderers): two runs
drawn at random from one pool of items (random subsets, a few items whose content differs,
random outcomes, k = 1 to 3 samples per item, RIMO-N and RIMO-P), each side's metrics made by
the score stage's own ``compute`` as the score stage writes them. Issue 29 §2: a full run against
a sample reported Δ = the difference of the two metrics.json (different items) beside a paired
interval over the shared items, so Δ fell outside its own interval.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rimo_eval.artifacts.items import DOMAINS
from rimo_eval.commands.compare.command import Revision, Side, compare_sides, render_markdown
from rimo_eval.commands.compare.render import fmt_ci, fmt_delta
from rimo_eval.commands.compare.shared_items import require_same_items
from rimo_eval.errors import DataError
from rimo_eval.rimo.grading import leading_matches
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.metrics import compute

POOL_N, POOL_P = 14, 10
BOOT = {"samples": 0, "seed": 0, "confidence": 0.95}  # each side's own intervals: not compared


def pool() -> st.SearchStrategy[dict[str, Any]]:
    """The benchmark both runs draw from: domains, parts, gradable flags."""
    return st.fixed_dictionaries({
        "domain": st.lists(st.sampled_from(DOMAINS), min_size=POOL_N, max_size=POOL_N),
        "parts": st.lists(st.integers(1, 4), min_size=POOL_P, max_size=POOL_P),
        # Mostly gradable, as in the benchmark (2 of 456 RIMO-P items are not).
        "gradable": st.lists(st.integers(0, 9).map(lambda v: v != 0), min_size=POOL_P,
                             max_size=POOL_P),
    })


@st.composite
def run(draw: st.DrawFn, items: dict[str, Any], name: str) -> dict[str, Any]:
    """One run: which pool items it evaluated, which it saw with other contents, k, outcomes."""
    k = draw(st.integers(1, 3))
    n_in = draw(st.lists(st.booleans(), min_size=POOL_N, max_size=POOL_N))
    p_in = draw(st.lists(st.booleans(), min_size=POOL_P, max_size=POOL_P))
    # A changed item (errata between the runs): same id, another item hash; B only.
    changed = draw(st.sets(st.integers(0, POOL_N - 1), max_size=2)) if name == "b" else set()
    n_rows, p_rows = [], []
    for i in range(POOL_N):
        if not n_in[i]:
            continue
        for j in range(k):
            right = draw(st.booleans())
            n_rows.append({"track": TRACK_N, "problem_id": f"n{i:02d}", "sample": j,
                           "domain": items["domain"][i],
                           "item_hash": f"hn{i}" + ("x" if i in changed else ""),
                           "status": "ok", "gold": "7", "prediction": "7" if right else "8",
                           "correct": right})
    for i in range(POOL_P):
        if not p_in[i]:
            continue
        parts, gradable = items["parts"][i], items["gradable"][i]
        for j in range(k):
            matched = ([draw(st.booleans()) for _ in range(parts)] if gradable else [])
            prefix = leading_matches(matched)
            p_rows.append({"track": TRACK_P, "problem_id": f"p{i:02d}", "sample": j,
                           "domain": "algebra", "item_hash": f"hp{i}",
                           "number_of_parts": parts, "gradable": gradable,
                           "ungradable_reason": None if gradable else "empty reference",
                           "status": "ok", "n_predicted": parts, "matched": matched,
                           "n_matched": sum(matched), "prefix_len": prefix,
                           "strict": gradable and prefix == parts,
                           "prefix_score": prefix / parts if gradable else 0.0})
    return {"k": k, "n": n_rows, "p": p_rows}


N_COLUMNS = ["track", "problem_id", "sample", "domain", "item_hash", "status", "gold",
             "prediction", "correct"]
P_COLUMNS = ["track", "problem_id", "sample", "domain", "item_hash", "number_of_parts",
             "gradable", "ungradable_reason", "status", "n_predicted", "matched", "n_matched",
             "prefix_len", "strict", "prefix_score"]


def side(name: str, drawn: dict[str, Any]) -> Side:
    scores = {TRACK_N: pd.DataFrame(drawn["n"], columns=N_COLUMNS),
              TRACK_P: pd.DataFrame(drawn["p"], columns=P_COLUMNS)}
    # The metrics.json of the run, as the score stage computes it over its own items.
    metrics = compute(scores, {TRACK_N: POOL_N, TRACK_P: POOL_P}, BOOT)
    return Side(Revision(name, "git", name * 40), metrics, scores)


def per_item(frame: pd.DataFrame, col: str) -> dict[tuple[str, str], float]:
    """Each item's mean of ``col`` over its samples, keyed like compare pairs items."""
    if frame.empty:
        return {}
    means = frame.groupby(["problem_id", "item_hash"])[col].mean()
    return {key: float(v) for key, v in means.items()}


def shared_delta(a: pd.DataFrame, b: pd.DataFrame, col: str) -> float | None:
    ma, mb = per_item(a, col), per_item(b, col)
    both = sorted(ma.keys() & mb.keys())
    return None if not both else float(np.mean([mb[x] - ma[x] for x in both]))


def runs() -> st.SearchStrategy[tuple[Side, Side, int]]:
    return pool().flatmap(lambda items: st.tuples(
        run(items, "a").map(lambda d: side("a", d)),
        run(items, "b").map(lambda d: side("b", d)),
        st.integers(0, 2**16)))


@settings(max_examples=30, deadline=None)
@given(runs())
def test_every_delta_lies_in_its_interval_over_the_shared_items(drawn: tuple[Side, Side, int]
                                                                ) -> None:
    a, b, seed = drawn
    result = compare_sides(a, b, samples=100, seed=seed)
    rows = {r["name"]: r for r in result["metrics"]}
    for r in result["metrics"]:
        ci = r["ci"]
        if ci is not None and ci["low"] is not None and r["delta"] is not None:
            assert ci["low"] <= r["delta"] <= ci["high"], r
    # The headline Δ is B - A over the items both runs evaluated with the same contents
    # (mean over samples when k > 1), computed here independently of compare.
    k = max(result["tracks"][t]["k"][s] for t in TRACKS for s in "ab")
    n_name = f"{TRACK_N}.accuracy" if k == 1 else f"{TRACK_N}.mean_at_k.accuracy"
    want = shared_delta(a.scores[TRACK_N], b.scores[TRACK_N], "correct")
    got = rows[n_name]["delta"] if n_name in rows else None
    assert (got is None) == (want is None)
    if want is not None:
        assert got == pytest.approx(want, abs=1e-6)
    pa, pb = (s.scores[TRACK_P][s.scores[TRACK_P]["gradable"]] for s in (a, b))
    p_name = f"{TRACK_P}.prefix_score" if k == 1 else f"{TRACK_P}.mean_at_k.prefix_score"
    want = shared_delta(pa, pb, "prefix_score")
    if want is not None:
        assert rows[p_name]["delta"] == pytest.approx(want, abs=1e-6)
    # The header counts are the item sets' own.
    for t in TRACKS:
        ka, kb = (set(zip(s.scores[t]["problem_id"], s.scores[t]["item_hash"], strict=True))
                  for s in (a, b))
        assert result["items"][t]["shared"] == len(ka & kb)
    same = all(set(zip(a.scores[t]["problem_id"], a.scores[t]["item_hash"], strict=True))
               == set(zip(b.scores[t]["problem_id"], b.scores[t]["item_hash"], strict=True))
               for t in TRACKS)
    assert result["items"]["same"] is same
    # The table shows the JSON's Δ and interval, and opens with the item sets when they differ.
    md = render_markdown(result)
    for r in result["metrics"]:
        if r["rate"] and not r["name"].startswith(f"{TRACK_P}.judge"):
            assert f"| {fmt_delta(r['delta'])} | {fmt_ci(r['ci'])} |" in md, r["name"]
    assert ("The runs evaluated different items" in md.splitlines()[2]) is (not same)


def drawn_run(k: int, n_ids: range, correct: bool) -> dict[str, Any]:
    n = [{"track": TRACK_N, "problem_id": f"n{i:02d}", "sample": j, "domain": "algebra",
          "item_hash": f"hn{i}", "status": "ok", "gold": "7",
          "prediction": "7" if correct else "8", "correct": correct}
         for i in n_ids for j in range(k)]
    return {"k": k, "n": n, "p": []}


def test_full_run_against_a_sample_compares_the_shared_items_and_says_so() -> None:
    """The issue's case in small: A, a full run, right on 4 items and wrong on 6 more (accuracy
    0.4); B, a sample of those 4, wrong on all of them (0.0). The two metrics.json differ by
    -0.4, but over the 4 shared items B - A is -1, and so is every resample: [-1, -1]."""
    rows = drawn_run(1, range(4), True)["n"] + drawn_run(1, range(4, 10), False)["n"]
    a = side("a", {"n": rows, "p": []})
    b = side("b", drawn_run(1, range(4), False))
    result = compare_sides(a, b, samples=200)
    acc = {r["name"]: r for r in result["metrics"]}[f"{TRACK_N}.accuracy"]
    assert (acc["a"], acc["b"], acc["delta"]) == (1.0, 0.0, -1.0)
    assert acc["ci"] == {"low": -1.0, "high": -1.0}
    counts = {r["name"]: r for r in result["metrics"]}
    assert counts[f"{TRACK_N}.n"]["a"] == counts[f"{TRACK_N}.n"]["b"] == 4
    assert result["items"][TRACK_N] == {"shared": 4, "only_a": 6, "only_b": 0,
                                        "changed_items": 0}
    md = render_markdown(result)
    assert md.splitlines()[2] == (
        "**The runs evaluated different items: RIMO-N: 4 shared, 6 only in A, 0 only in B; "
        "RIMO-P: 0 shared, 0 only in A, 0 only in B. Everything below (A, B, Δ, intervals, "
        "tests, flips) is over the shared items only; --strict refuses such a pair.**")
    with pytest.raises(DataError, match="a and b are not comparable: different items "
                                        r"\(RIMO-N: 4 shared, 6 only in A"):
        require_same_items({t: {"shared": 4, "only_a": list("abcdef") if t == TRACK_N else [],
                                "only_b": [], "changed_items": []} for t in TRACKS}, "a", "b")
