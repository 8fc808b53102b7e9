"""The site's data: a small index (grid, headers, flips) and one payload per item.

Outcome codes, one character per sample, shared with app.js:
RIMO-N ``R`` right, ``W`` wrong, ``T`` wrong and truncated (finish reason ``length``),
``M`` missing, ``E`` error; RIMO-P ``S`` strictly right, ``0``-``4`` parts matched, ``U``
ungradable, ``M``, ``E``; ``-`` not evaluated in that run (a sample run, say).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

from rimo_eval.artifacts.flags import FLAGS_N
from rimo_eval.commands.compare.pairing import TESTED, flips, pair
from rimo_eval.commands.compare.samples import per_item, sample_count
from rimo_eval.commands.view.load import Run
from rimo_eval.commands.view.packing import source
from rimo_eval.commands.view.packing import text as shown
from rimo_eval.commands.view.words import reasonings, search_text
from rimo_eval.commands.view.years import bands, item_year, run_cutoffs, unseen_options
from rimo_eval.core.metrics_files import interval
from rimo_eval.io.parquet import records
from rimo_eval.rimo.text_quality import WARNING_RULES, text_warnings
from rimo_eval.rimo.tracks import HEADLINE, TRACK_N, TRACK_P, TRACKS

# The score stage's diagnostic flags (one per row), where the scores table has them; RIMO-P's
# (FLAGS_P) are among them.
FLAGS = FLAGS_N


def _value(x: Any) -> Any:
    if x is None or (isinstance(x, float) and x != x):
        return None
    if hasattr(x, "item"):
        return x.item()
    return x


def _text(x: Any) -> str:
    x = _value(x)
    return "" if x is None else str(x)


def _list(x: Any) -> list[Any]:
    x = _value(x) if not hasattr(x, "__len__") or isinstance(x, str) else x
    return [] if x is None or isinstance(x, str) else list(x)


def item_key(track: str, pid: str) -> str:
    return f"{track}:{pid}"


# --- headers ------------------------------------------------------------------------------------


def _interval(block: dict[str, Any], metric: str) -> list[Any] | None:
    low, high = interval(block, metric)  # old runs' RIMO-N accuracy keys too
    return None if low is None or high is None else [low, high]


def header(run: Run, cutoff: str | None = None) -> dict[str, Any]:
    """Headline metrics with their intervals, read from the run's metrics.json; ``cutoff``:
    the run's training cutoff, where known."""
    tracks = {}
    for track in TRACKS:
        block = run.metrics.get(track) or {}
        rows = [{"name": m, "value": block.get(m), "ci": _interval(block, m)}
                for m in HEADLINE[track]]
        for name, sub in (("mean@k", "mean_at_k"),):
            inner = block.get(sub) or {}
            for m in HEADLINE[track]:
                if m in inner:
                    rows.append({"name": f"{name} {m}", "value": inner[m],
                                 "ci": _interval(inner, m)})
        for m in ("pass_at_k", "maj_at_k"):
            if m in block:
                rows.append({"name": m.replace("_at_", "@"), "value": block[m],
                             "ci": _interval(block, m)})
        diag = block.get("diagnostics") or {}
        if "lenient_accuracy" in diag:
            rows.append({"name": "lenient accuracy (diagnostic)",
                         "value": diag["lenient_accuracy"], "ci": None})
        flag_counts = {f: diag[f] for f in FLAGS if isinstance(diag.get(f), int | float)}
        counts = {c: block[c] for c in ("n", "correct", "missing", "errors", "ungradable")
                  if isinstance(block.get(c), int | float)}
        tracks[track] = {"metrics": rows, "counts": counts, "diagnostics": flag_counts}
    preds = run.predictions[TRACK_N] if len(run.predictions[TRACK_N]) else \
        run.predictions[TRACK_P]
    backend = _text(preds["backend"].iloc[0]) if len(preds) else ""
    model = ""
    if len(preds):
        try:
            model = _text((json.loads(_text(preds["backend_params"].iloc[0])) or {})
                          .get("model"))
        except (ValueError, AttributeError):
            model = ""
    sample = run.metrics.get("sample") or {}
    return {"label": run.label, "kind": run.revision.kind, "rev": run.revision.rev,
            "backend": backend, "model": model, "k": run.k,
            "is_sample": bool(sample.get("is_sample")), "tracks": tracks, "cutoff": cutoff}


# --- outcomes -----------------------------------------------------------------------------------


def _flags(row: dict[str, Any], details: dict[str, Any], present: Sequence[str]) -> list[str]:
    out = [f for f in present if bool(_value(row.get(f)))]
    if "truncated" not in present and _finish(details) == "length":
        out.append("truncated")  # older scores tables: read the finish reason itself
    return sorted(out, key=FLAGS.index)


def _finish(details: dict[str, Any]) -> str:
    return _text(details.get("finish_reason"))


def outcome(track: str, row: dict[str, Any], flags: Iterable[str]) -> str:
    status = _text(row.get("status"))
    if status == "pending":  # a partial view's sample with no reply yet: not evaluated
        return "-"
    if track == TRACK_P and not bool(row.get("gradable")):
        return "U"
    if status == "error":
        return "E"
    if status == "missing":
        return "M"
    if track == TRACK_N:
        if bool(row.get("correct")):
            return "R"
        return "T" if "truncated" in flags else "W"
    return "S" if bool(row.get("strict")) else str(min(int(row.get("n_matched") or 0), 9))


def rows_by_item(scores: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    frame = scores if "sample" in scores.columns else scores.assign(sample=0)
    for r in records(frame.sort_values(["problem_id", "sample"], kind="stable")):
        out.setdefault(str(r["problem_id"]), []).append(r)
    return out


# --- item payloads ------------------------------------------------------------------------------


def _usage(details: dict[str, Any]) -> dict[str, Any]:
    usage = details.get("usage")
    return {k: v for k, v in sorted(usage.items()) if isinstance(v, int | float)} \
        if isinstance(usage, dict) else {}


def _sample_n(row: dict[str, Any], details: dict[str, Any], present: Sequence[str]
              ) -> dict[str, Any]:
    flags = _flags(row, details, present)
    reply = details.get("text") if isinstance(details.get("text"), str) else \
        details.get("raw_text")
    return {"s": int(row["sample"]), "status": _text(row.get("status")),
            "error": _text(details.get("error")) or None, "pred": _value(row.get("prediction")),
            "ok": bool(row.get("correct")), "o": outcome(TRACK_N, row, flags), "flags": flags,
            "text": shown(reply if isinstance(reply, str) else None),
            "reasoning": shown(_text(details.get("reasoning"))),
            "usage": _usage(details), "finish": _finish(details) or None,
            "extraction": _text(details.get("extraction")) or None}


def _sample_p(row: dict[str, Any], details: dict[str, Any], prediction: list[str],
              judged: dict[int, dict[str, Any]], present: Sequence[str]) -> dict[str, Any]:
    flags = _flags(row, details, present)
    parts_d = found if isinstance(found := details.get("parts"), list) else []
    matched = [bool(m) for m in _list(row.get("matched"))]
    count = max(int(row.get("number_of_parts") or 0), len(prediction))
    parts = []
    for i in range(count):
        d = parts_d[i] if i < len(parts_d) and isinstance(parts_d[i], dict) else {}
        j = judged.get(i + 1)
        parts.append({"text": shown(prediction[i]) if i < len(prediction) else None,
                      "m": matched[i] if i < len(matched) else None,
                      "finish": _finish(d) or None,
                      "reasoning": shown(_text(d.get("reasoning"))),
                      "judge": None if j is None else {
                          "verdict": _text(j.get("verdict")),
                          "reason": shown(_text(j.get("reason")))}})
    return {"s": int(row["sample"]), "status": _text(row.get("status")),
            "error": _text(details.get("error")) or None, "o": outcome(TRACK_P, row, flags),
            "strict": bool(row.get("strict")), "n_matched": int(row.get("n_matched") or 0),
            "prefix": int(row.get("prefix_len") or 0), "flags": flags, "parts": parts,
            "usage": _usage(details), "finish": _finish(details) or None}


def item_texts(track: str, item: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The item's own texts as the page shows them, and its data-quality warnings. A text that
    a check of rimo_eval.rimo.text_quality flags (doubled backslashes, control characters) is
    shown as the model received it: its source, not rendered math."""
    found: dict[str, list[str]] = {}

    def show(label: str, value: str) -> Any:
        hits = text_warnings(value)
        for rule, _message in hits:
            found.setdefault(rule, []).append(label)
        return source(value) if hits else shown(value)

    out: dict[str, Any] = {"problem": show("problem", _text(item.get("problem")))}
    if track == TRACK_N:
        out["solution"] = show("reference solution", _text(item.get("solution")))
    else:
        for key, label in (("sub_problems", "sub-problem"), ("sub_solutions", "sub-solution")):
            out[key] = [show(f"{label} {i + 1}", str(x))
                        for i, x in enumerate(_list(item.get(key)))]
    return out, [{"rule": rule, "fields": found[rule]} for rule in WARNING_RULES if rule in found]


def item_payload(track: str, item: dict[str, Any], runs: Sequence[Run],
                 rows: Sequence[dict[str, list[dict[str, Any]]]],
                 preds: Sequence[dict[tuple[str, int], Any]],
                 errors: Sequence[dict[tuple[str, int], Any]],
                 judges: Sequence[dict[tuple[str, int], dict[int, dict[str, Any]]]]
                 ) -> dict[str, Any]:
    pid = str(item["problem_id"])
    out: dict[str, Any] = {
        "key": item_key(track, pid), "track": track, "id": pid,
        "domain": _text(item.get("domain")), "parts": int(item["number_of_parts"]), "runs": [],
        **item_year(pid)}
    texts, warnings = item_texts(track, item)
    out |= texts
    if warnings:
        out["data_warnings"] = warnings
    if track == TRACK_N:
        out["gold"] = _text(item.get("answer"))
    else:
        out["gradable"] = bool(item.get("gradable"))
        out["ungradable_reason"] = _text(item.get("ungradable_reason")) or None
    for i, run in enumerate(runs):
        present = [f for f in FLAGS if f in run.scores[track].columns]
        samples = []
        for r in rows[i].get(pid, []):
            details = run.sample_details(track, pid, int(r["sample"]))
            error = errors[i].get((pid, int(r["sample"])))
            if error and "error" not in details:
                details = {**details, "error": error}  # the predictions table's reason
            if track == TRACK_N:
                samples.append(_sample_n(r, details, present))
            else:
                prediction = [str(x) for x in _list(preds[i].get((pid, int(r["sample"]))))]
                samples.append(_sample_p(r, details, prediction,
                                         judges[i].get((pid, int(r["sample"])), {}), present))
        out["runs"].append(samples or None)
    return out


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
        out[track] = {"metric": TESTED[track], "paired": len(paired), "k": k,
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
