"""Which runs may share a leaderboard: the same items, the same k, the same upstream data.

A rank over different questions, or over k = 1 against k = 4, would be a number without a
meaning; such a set of runs is refused with the reason, naming both runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from stages.commands.leaderboard.loading import Run
from stages.core.errors import DataError
from stages.core.tracks import TRACKS


def _items(run: Run, track: str) -> frozenset[tuple[str, str]]:
    frame = run.scores[track]
    first = frame[frame["sample"] == 0]
    return frozenset(zip(first["problem_id"], first["item_hash"], strict=True))


def _describe(run: Run) -> str:
    sample = run.metrics.get("sample") or {}
    counts = "/".join(str(len(_items(run, t))) for t in TRACKS)
    what = "a sample" if sample.get("is_sample") else "all items"
    return f"{run.label} evaluates {counts} {'/'.join(TRACKS)} items ({what})"


def _upstream(run: Run) -> dict | None:
    return run.provenance.get("upstream")


def check(runs: Sequence[Run]) -> None:
    """Raise a DataError with the first reason the runs are not comparable to the first run."""
    ref = runs[0]
    for run in runs[1:]:
        if run.k != ref.k:
            raise DataError(
                f"{ref.label} and {run.label} are not comparable: different k "
                f"(samples per item): {ref.label} has k = {ref.k}, {run.label} k = {run.k}. "
                f"Rank runs with the same predict.samples.")
        up_a, up_b = _upstream(ref), _upstream(run)
        if up_a is not None and up_b is not None and up_a != up_b:
            sha_a, sha_b = up_a.get("sha256") or {}, up_b.get("sha256") or {}
            files = sorted(f for f in {*sha_a, *sha_b} if sha_a.get(f) != sha_b.get(f))
            what = (f"sha256 of {', '.join(files)}" if files else
                    f"upstream revision {up_a.get('revision')} vs {up_b.get('revision')}")
            raise DataError(
                f"{ref.label} and {run.label} are not comparable: different "
                f"upstream data ({what} differ, provenance.json's upstream pin).")
        for track in TRACKS:
            a, b = _items(ref, track), _items(run, track)
            if a == b:
                continue
            ids_a, ids_b = {i for i, _ in a}, {i for i, _ in b}
            if ids_a == ids_b:
                changed = sorted(i for i, h in a ^ b)
                raise DataError(
                    f"{ref.label} and {run.label} are not comparable: different "
                    f"items: {track} items {changed[:5]} have other contents (item_hash), so "
                    f"the runs answered different questions (errata or upstream changed).")
            raise DataError(
                f"{ref.label} and {run.label} are not comparable: different "
                f"items: {_describe(ref)}, {_describe(run)} ({track}: "
                f"{len(ids_a - ids_b)} only in {ref.label}, {len(ids_b - ids_a)} only in "
                f"{run.label}). Rank runs over the same items (predict.limit, "
                f"predict.sample_seed).")


__all__ = ["check"]
