"""The site's data: a small index (grid, headers, flips) and one payload per item (payload.py;
each run's header: header.py)."""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rimo_eval.commands.compare.pairing import TESTED, flips, pair
from rimo_eval.commands.compare.samples import per_item, sample_count
from rimo_eval.commands.view.header import header
from rimo_eval.commands.view.load import Run
from rimo_eval.commands.view.payload import (
    FLAGS,
    _list,
    _text,
    item_key,
    item_payload,
    item_texts,
    outcome,
    rows_by_item,
)
from rimo_eval.commands.view.words import reasonings, search_text
from rimo_eval.commands.view.years import bands, run_cutoffs, unseen_options
from rimo_eval.io.parquet import records
from rimo_eval.rimo.text_quality import WARNING_RULES
from rimo_eval.rimo.tracks import TRACK_P, TRACKS, metric_words


def _prediction_index(run: Run, track: str, column: str = "prediction"
                      ) -> dict[tuple[str, int], Any]:
    frame = run.predictions[track]
    samples = frame["sample"] if "sample" in frame.columns else [0] * len(frame)
    return {(str(pid), int(s)): v
            for pid, s, v in zip(frame["problem_id"], samples, frame[column], strict=True)}


def _judge_index(run: Run) -> dict[tuple[str, int], dict[int, dict[str, Any]]]:
    out: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    if run.judge is None:
        return out
    for r in records(run.judge):
        out.setdefault((str(r["problem_id"]), int(r["sample"])), {})[int(r["part"])] = r
    return out


# --- flips --------------------------------------------------------------------------------------


def pair_flips(a: Run, b: Run) -> dict[str, Any]:
    """The items that flip between two runs, as ``rimo-eval compare`` lists them (same pairing,
    same gradable filter); compare lists none when either run has k > 1, and neither do we."""
    out: dict[str, Any] = {}
    for track in TRACKS:
        k = max(sample_count(a.scores[track]), sample_count(b.scores[track]))
        paired, unpaired = pair(per_item(track, a.scores[track]), per_item(track, b.scores[track]))
        if track == TRACK_P:
            paired = paired[paired["gradable_a"].astype(bool)].reset_index(drop=True)
        rows = flips(track, paired) if k == 1 else []
        tested = "accuracy" if TESTED[track] == "correct" else TESTED[track]
        out[track] = {"metric": metric_words(tested), "paired": len(paired), "k": k,
                      "flips": [{"id": r["problem_id"], "a": r["a"], "b": r["b"]} for r in rows],
                      "changed_items": unpaired["changed_items"]}
    return out


# --- the whole site -----------------------------------------------------------------------------


class Site:
    """The site of ``runs``, made an item at a time: iterate ``payloads()`` (each is written
    and dropped before the next is made, so a k = 64 reasoning run is never held whole), then
    ``index()`` and ``words`` (each item's search words, in index order) are complete."""

    def __init__(self, runs: Sequence[Run], cutoffs: Mapping[str, str] | None = None,
                 search_reasoning: bool = False) -> None:
        self.runs = runs
        # The search covers the problem and every answer; the reasoning too only on request:
        # it is most of a reasoning run's text (32 KB of 34 per reply), so indexing its words
        # was most of the build's time at k = 64 (benchmarks/README.md).
        self.search_reasoning = search_reasoning
        # Each run's training cutoff (``--cutoff RUN=DATE``, else its score.training_cutoff).
        self.cutoffs = run_cutoffs([r.label for r in runs], [r.params for r in runs],
                                   cutoffs or {})
        items: dict[tuple[str, str], dict[str, Any]] = {}
        for run in runs:
            for track in TRACKS:
                for r in records(run.items[track]):
                    items.setdefault((track, str(r["problem_id"])), r)
        self._items = items
        # The tables' own order (track, then problem id): the texts are read forward in it.
        self._order = sorted(items, key=lambda k: (TRACKS.index(k[0]), k[1]))
        self._rows = {t: [rows_by_item(run.scores[t]) for run in runs] for t in TRACKS}
        self._preds = {t: [_prediction_index(run, t) for run in runs] for t in TRACKS}
        self._errors = {t: [{k: _text(v) for k, v in _prediction_index(run, t, "error").items()
                             if _text(v)} for run in runs] for t in TRACKS}
        self._judges = [_judge_index(run) for run in runs]
        self.index_items: list[dict[str, Any]] = []
        self.words: list[str] = []

    @property
    def count(self) -> int:
        """How many items the site shows."""
        return len(self._order)

    def payloads(self) -> Iterator[dict[str, Any]]:
        """Every item's payload, in index order (``index_items`` and ``words`` fill as they
        come)."""
        self.index_items, self.words = [], []
        for n in range(self.count):
            payload, entry, words = self.made(n)
            self.collect([(entry, words)])
            yield payload

    def made(self, n: int) -> tuple[dict[str, Any], dict[str, Any], str]:
        """Item ``n``'s payload, its grid entry and its search words. Items are asked in
        ascending order (the texts are read forward); a worker process asks its own blocks."""
        runs = self.runs
        track, pid = self._order[n]
        item, rows, preds = self._items[(track, pid)], self._rows[track], self._preds[track]
        no_judge: list[dict[tuple[str, int], dict[int, dict[str, Any]]]] = [{} for _ in runs]
        payload = item_payload(track, item, runs, rows, preds, self._errors[track],
                               self._judges if track == TRACK_P else no_judge)
        outcomes, masks = [], []
        texts = [_text(item.get("problem")), *map(str, _list(item.get("sub_problems")))]
        for i, samples in enumerate(payload["runs"]):
            outcomes.append("".join(s["o"] for s in samples) if samples else "-")
            masks.append(sorted({f for s in samples or [] for f in s["flags"]},
                                key=FLAGS.index))
            for r in rows[i].get(pid, []):
                d = runs[i].sample_details(track, pid, int(r["sample"]))
                texts.append(_text(d.get("text") or d.get("raw_text")))
                p = preds[i].get((pid, int(r["sample"])))
                texts += [str(x) for x in _list(p)] if track == TRACK_P else [_text(p)]
                if self.search_reasoning:
                    texts += reasonings(d)
        entry = {"key": payload["key"], "track": track, "id": pid,
                 "domain": payload["domain"], "parts": payload["parts"], "o": outcomes,
                 "f": masks, "n": n, "gold": payload.get("gold"), "y": payload["year"],
                 "b": payload["band"]}
        if payload["shortlist"]:
            entry["sl"] = payload["shortlist"]
        if "data_warnings" in payload:  # upstream text the view marks (and can filter)
            entry["w"] = [w["rule"] for w in payload["data_warnings"]]
        return payload, entry, search_text(texts)

    def reopenable(self) -> bool:
        """Whether every run's texts can be read again by a worker of its own."""
        return all(c.path() is not None for run in self.runs for c in run.cursors.values())

    def reopen(self) -> None:
        """Give every run cursors of their own (in a forked worker; see ``reopenable``)."""
        for run in self.runs:
            run.cursors = {t: c.reopened() for t, c in run.cursors.items()}

    def collect(self, entries: list[tuple[dict[str, Any], str]]) -> None:
        """Grid entries and search words (an item's, or a worker's block), in index order."""
        for entry, words in entries:
            self.index_items.append(entry)
            self.words.append(words)

    def index(self) -> dict[str, Any]:
        runs = self.runs
        pairs = {f"{i}-{j}": pair_flips(runs[i], runs[j])
                 for i in range(len(runs)) for j in range(i + 1, len(runs))}
        seen = {rule for it in self.index_items for rule in it.get("w", ())}
        return {"version": 1, "items": self.index_items,
                "runs": [header(r, c) for r, c in zip(runs, self.cutoffs, strict=True)],
                "flags": list(FLAGS), "pairs": pairs,
                "data_rules": {r: d for r, d in WARNING_RULES.items() if r in seen},
                "bands": bands(it["y"] for it in self.index_items),
                "unseen": unseen_options([r.label for r in runs], self.cutoffs),
                "search_reasoning": self.search_reasoning}


def build(runs: Sequence[Run], cutoffs: Mapping[str, str] | None = None,
          search_reasoning: bool = False
          ) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """The index, the item payloads (in index order) and each item's search words, held
    whole (small runs and tests; ``view`` writes a ``Site`` as it is made)."""
    site = Site(runs, cutoffs, search_reasoning)
    payloads = list(site.payloads())
    return site.index(), payloads, site.words


__all__ = ["FLAGS", "Site", "build", "header", "item_key", "item_payload", "item_texts", "outcome",
           "pair_flips"]
