"""Which runs may share a leaderboard: the same items, the same k, the same upstream data.

A rank over different questions, or over k = 1 against k = 4, would be a number without a
meaning. Runs named on the command line must all be comparable: a mix is refused with the
reason, naming both runs. ``--all`` takes every run it finds, so it ranks the largest group of
comparable runs (on a tie, the group the workspace is in) and lists every other run with the
reason it was left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rimo_eval.commands.leaderboard.loading import LeftOut, Run
from rimo_eval.errors import DataError
from rimo_eval.rimo.tracks import TRACKS
from rimo_eval.run.revision import WORKSPACE


def _items(run: Run, track: str) -> frozenset[tuple[str, str]]:
    if track not in run.item_sets:
        frame = run.scores[track]
        first = frame[frame["sample"] == 0]
        run.item_sets[track] = frozenset(zip(first["problem_id"], first["item_hash"],
                                             strict=True))
    return run.item_sets[track]


def _describe(run: Run) -> str:
    sample = run.metrics.get("sample") or {}
    counts = "/".join(str(len(_items(run, t))) for t in TRACKS)
    what = "a sample" if sample.get("is_sample") else "all items"
    return f"{run.label} evaluates {counts} {'/'.join(TRACKS)} items ({what})"


def _upstream(run: Run) -> dict[str, Any] | None:
    return run.provenance.get("upstream")


def difference(ref: Run, run: Run) -> str | None:
    """Why ``run`` cannot be ranked with ``ref`` (the first reason), or None."""
    if run.k != ref.k:
        return (f"different k (samples per item): {ref.label} has k = {ref.k}, {run.label} "
                f"k = {run.k}. Rank runs with the same predict.samples.")
    up_a, up_b = _upstream(ref), _upstream(run)
    if up_a is not None and up_b is not None and up_a != up_b:
        sha_a, sha_b = up_a.get("sha256") or {}, up_b.get("sha256") or {}
        files = sorted(f for f in {*sha_a, *sha_b} if sha_a.get(f) != sha_b.get(f))
        what = (f"sha256 of {', '.join(files)}" if files else
                f"upstream revision {up_a.get('revision')} vs {up_b.get('revision')}")
        return f"different upstream data ({what} differ, provenance.json's upstream pin)."
    for track in TRACKS:
        a, b = _items(ref, track), _items(run, track)
        if a == b:
            continue
        ids_a, ids_b = {i for i, _ in a}, {i for i, _ in b}
        if ids_a == ids_b:
            changed = sorted(i for i, h in a ^ b)
            return (f"different items: {track} items {changed[:5]} have other contents "
                    f"(item_hash), so the runs answered different questions (errata or "
                    f"upstream changed).")
        return (f"different items: {_describe(ref)}, {_describe(run)} ({track}: "
                f"{len(ids_a - ids_b)} only in {ref.label}, {len(ids_b - ids_a)} only in "
                f"{run.label}). Rank runs over the same items (predict.limit, "
                f"predict.sample_seed).")
    return None


def check(runs: Sequence[Run]) -> None:
    """Raise a DataError with the first reason the runs are not comparable to the first run."""
    ref = runs[0]
    for run in runs[1:]:
        why = difference(ref, run)
        if why is not None:
            raise DataError(f"{ref.label} and {run.label} are not comparable: {why}")


def largest_group(runs: Sequence[Run]) -> tuple[list[Run], list[LeftOut], str]:
    """``--all``: (the runs to rank, in their order, the others with the reason, and one line
    saying which group was ranked and why).

    Runs are grouped by comparability with each group's first run. The largest group is
    ranked; on a tie, the group holding the workspace, else the earliest. Each run left out
    is described against the ranked group's first run (the workspace when it is in it)."""
    groups: list[list[Run]] = []
    for run in runs:
        home = next((g for g in groups if difference(g[0], run) is None), None)
        if home is None:
            groups.append([run])
        else:
            home.append(run)

    def weight(group: list[Run]) -> tuple[int, bool]:
        return len(group), any(r.revision.kind == WORKSPACE for r in group)

    best = max(groups, key=weight)  # max keeps the earliest of equals
    # The workspace first: a left-out run is described against it where it is ranked.
    refs = sorted(best, key=lambda r: r.revision.kind != WORKSPACE)
    ranked, left = [], []
    for run in runs:
        if any(run is r for r in best):  # comparable with every run of its group
            ranked.append(run)
            continue
        why = next((w for ref in refs if (w := difference(ref, run)) is not None), None)
        if why is None:
            ranked.append(run)
        else:
            ref = next(r for r in refs if difference(r, run) is not None)
            left.append(LeftOut(run.label, run.revision.to_json(),
                                f"not comparable with {ref.label}: {why}"))
    return ranked, left, _why(best, groups, weight)


def _why(best: list[Run], groups: list[list[Run]], weight: Callable[[list[Run]], Any]) -> str:
    """One line: the group ranked, what its runs share, and why it was picked."""
    first = best[0]
    sample = "a sample" if (first.metrics.get("sample") or {}).get("is_sample") else "all items"
    shared = (f"k = {first.k}, {'/'.join(str(len(_items(first, t))) for t in TRACKS)} "
              f"{'/'.join(TRACKS)} items ({sample})")
    rivals = [g for g in groups if g is not best]
    if not rivals:
        reason = "every run found is comparable"
    elif all(len(g) < len(best) for g in rivals):
        reason = (f"the largest of {len(groups)} groups of comparable runs (the next has "
                  f"{max(len(g) for g in rivals)})")
    elif weight(best)[1]:
        reason = (f"tied for the largest of {len(groups)} groups: the workspace's group")
    else:
        reason = f"tied for the largest of {len(groups)} groups: the first found"
    return f"--all ranks {len(best)} runs, {shared}: {reason}"


__all__ = ["check", "difference", "largest_group"]
