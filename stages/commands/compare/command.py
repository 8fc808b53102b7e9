"""``rimo-eval compare A B``: two revisions, branches or DVC experiments side by side.

Artifacts are read through DVC at each revision (git for metrics.json, the DVC cache for the
per-item scores), so nothing is checked out and the workspace is left alone. Items are paired
by (problem_id, item hash), which makes the tests paired: exact McNemar on the discordant pairs
of RIMO-N ``correct`` and RIMO-P ``strict``, and a seeded paired bootstrap (items resampled
jointly for A and B) for the delta of every rate metric.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from stages.core.artifacts import JUDGE_METRICS_PATH
from stages.core.atomic import write_text
from stages.core.errors import StageError
from stages.core.items import DOMAINS
from stages.core.tracks import HEADLINE, TRACK_N, TRACK_P, TRACKS
from stages.judge.metrics import compare_rows as judge_rows
from stages.score.stage import METRICS_PATH, SCORE_FILES, SCORES_DIR

WORKSPACE = "workspace"
TESTED = {TRACK_N: "correct", TRACK_P: "strict"}


# --- statistics --------------------------------------------------------------------------------


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar: under H0 each of the b + c discordant pairs goes either way with
    probability 1/2, so p = 2 * P(X <= min(b, c)), X ~ Binomial(b + c, 1/2), capped at 1."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


Ratio = tuple[np.ndarray, np.ndarray, np.ndarray]  # numerator in A, numerator in B, denominator


def ratio_delta(spec: Ratio) -> float | None:
    num_a, num_b, den = spec
    total = float(den.sum())
    return None if total == 0 else (float(num_b.sum()) - float(num_a.sum())) / total


def paired_bootstrap(specs: Mapping[str, Ratio], samples: int, seed: int, confidence: float
                     ) -> dict[str, dict[str, float] | None]:
    """Percentile interval of each delta sum(num_B)/sum(den) - sum(num_A)/sum(den) over items
    resampled with replacement; one index draw serves A, B and every metric, which is what
    makes the interval paired (and consistent across metrics)."""
    n = len(next(iter(specs.values()))[2]) if specs else 0
    if n == 0 or samples <= 0:
        return dict.fromkeys(specs)
    idx = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    alpha = (1 - confidence) / 2
    out: dict[str, dict[str, float] | None] = {}
    for name, (num_a, num_b, den) in specs.items():
        den_s = den[idx].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            delta = (num_b[idx].sum(axis=1) - num_a[idx].sum(axis=1)) / den_s
        delta = delta[den_s > 0]  # a resample without the subgroup says nothing about it
        if delta.size == 0:
            out[name] = None
            continue
        low, high = np.quantile(delta, [alpha, 1 - alpha])
        out[name] = {"low": round(float(low), 6), "high": round(float(high), 6)}
    return out


# --- pairing -----------------------------------------------------------------------------------


def _domain(value: Any) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def pair(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Inner join on (problem_id, item_hash): an item whose content changed between A and B is
    a different question, so it is reported, not paired."""
    merged = a.merge(b, on=["problem_id", "item_hash"], suffixes=("_a", "_b"), how="inner",
                     validate="one_to_one")
    ids_a, ids_b = set(a["problem_id"]), set(b["problem_id"])
    changed = sorted((ids_a & ids_b) - set(merged["problem_id"]))
    unpaired = {"only_a": sorted(ids_a - ids_b), "only_b": sorted(ids_b - ids_a),
                "changed_items": changed}
    return merged.sort_values("problem_id", kind="stable").reset_index(drop=True), unpaired


def _f(frame: pd.DataFrame, col: str) -> np.ndarray:
    return frame[col].to_numpy(dtype=float)


def ratio_specs(track: str, paired: pd.DataFrame) -> dict[str, Ratio]:
    """Every rate metric of metrics.json as a ratio of per-item sums, named like its key."""
    specs: dict[str, Ratio] = {}
    n = len(paired)
    ones = np.ones(n)
    if track == TRACK_N:
        ca, cb = _f(paired, "correct_a"), _f(paired, "correct_b")
        specs[f"{TRACK_N}.accuracy"] = (ca, cb, ones)
        domains = paired["domain_a"].map(_domain) if n else pd.Series(dtype=object)
        for d in DOMAINS:
            mask = (domains == d).to_numpy(dtype=float)
            if mask.any():
                specs[f"{TRACK_N}.by_domain.{d}"] = (ca * mask, cb * mask, mask)
        return specs
    cols = {"strict": ("strict", None), "sub_problem_accuracy": ("n_matched", "number_of_parts"),
            "prefix_score": ("prefix_score", None)}
    parts = paired["number_of_parts_a"].to_numpy(dtype=float) if n else np.zeros(0)

    def add(prefix: str, mask: np.ndarray) -> None:
        for name, (num, den) in cols.items():
            d = parts * mask if den else mask
            specs[f"{prefix}{name}"] = (_f(paired, f"{num}_a") * mask,
                                        _f(paired, f"{num}_b") * mask, d)

    add(f"{TRACK_P}.", ones)
    for k in sorted({int(x) for x in parts}):
        add(f"{TRACK_P}.by_parts.{k}.", (parts == k).astype(float))
    return specs


def flips(track: str, paired: pd.DataFrame) -> list[dict[str, Any]]:
    col = TESTED[track]
    out = []
    for r in paired.to_dict("records"):
        a, b = bool(r[f"{col}_a"]), bool(r[f"{col}_b"])
        if a != b:
            row = {"problem_id": r["problem_id"], "domain": _domain(r["domain_a"]), "a": a,
                   "b": b}
            if track == TRACK_P:
                row["parts"] = int(r["number_of_parts_a"])
            out.append(row)
    return out


def compare_track(track: str, a: pd.DataFrame, b: pd.DataFrame, samples: int, seed: int,
                  confidence: float) -> dict[str, Any]:
    paired, unpaired = pair(a, b)
    if track == TRACK_P:
        # strict and the other RIMO-P rates are defined over gradable items only.
        paired = paired[paired["gradable_a"].astype(bool)].reset_index(drop=True)
    specs = ratio_specs(track, paired)
    intervals = paired_bootstrap(specs, samples, seed, confidence)
    flipped = flips(track, paired)
    lost = sum(1 for f in flipped if f["a"])
    gained = len(flipped) - lost
    col = TESTED[track]
    return {
        "paired": len(paired),
        **unpaired,
        "test": {"name": "exact McNemar", "metric": col, "right_in_a_only": lost,
                 "right_in_b_only": gained, "discordant": lost + gained,
                 "both_right": int((paired[f"{col}_a"] & paired[f"{col}_b"]).sum()),
                 "both_wrong": int((~paired[f"{col}_a"] & ~paired[f"{col}_b"]).sum()),
                 "p_value": mcnemar_exact(lost, gained)},
        "deltas": {name: {"paired_delta": None if (d := ratio_delta(s)) is None
                          else round(d, 6), "ci": intervals[name]}
                   for name, s in specs.items()},
        "flips": flipped,
    }


# --- the metric table --------------------------------------------------------------------------


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _table_keys(metrics: Mapping[str, Any]) -> dict[str, Any]:
    # Each side's own intervals and the provenance are not quantities to subtract.
    keep = {k: v for k, v in metrics.items() if k in TRACKS or k == "sample"}
    return {k: v for k, v in _flatten(keep).items()
            if ".ci." not in k and not isinstance(v, bool)}


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def metric_rows(ma: Mapping[str, Any], mb: Mapping[str, Any],
                deltas: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    fa, fb = _table_keys(ma), _table_keys(mb)
    names = [*fa, *(k for k in fb if k not in fa)]

    spec_pos = {name: k for k, name in enumerate(deltas)}

    def order(item: tuple[int, str]) -> tuple[int, int, int]:
        # Per track: headline metrics, then the other rates in spec order, then the counts.
        pos, name = item
        head, _, rest = name.partition(".")
        track = TRACKS.index(head) if head in TRACKS else len(TRACKS)
        headline = HEADLINE.get(head, ())
        if rest in headline:
            return (track, headline.index(rest), 0)
        if name in spec_pos:
            return (track, len(headline), spec_pos[name])
        return (track, len(headline) + 1, pos)

    rows = []
    for _, name in sorted(enumerate(names), key=order):
        a, b = fa.get(name), fb.get(name)
        d = deltas.get(name) or {}
        rows.append({"name": name, "a": a, "b": b, "rate": name in deltas,
                     "delta": round(b - a, 6) if _number(a) and _number(b) else None,
                     "ci": d.get("ci"), "paired_delta": d.get("paired_delta")})
    return rows


# --- reading the two sides ---------------------------------------------------------------------


@dataclass(frozen=True)
class Revision:
    label: str  # as the user wrote it
    kind: str  # workspace | git | experiment
    rev: str | None  # commit sha; None for the workspace
    ref: str | None = None  # refs/exps/... for an experiment

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind, "rev": self.rev, "ref": self.ref}


def resolve(root: Path, name: str) -> Revision:
    """A git revision (branch, tag, sha, HEAD~1...) first, else a DVC experiment name."""
    if name == WORKSPACE:
        return Revision(name, WORKSPACE, None)
    from dvc.exceptions import DvcException
    from dvc.repo import Repo
    from dvc.repo.experiments.utils import resolve_name
    from dvc.scm import RevError, resolve_rev

    try:
        with Repo(os.fspath(root)) as repo:
            # DVC's own order: branches, tags and shas first, then experiment names.
            sha = resolve_rev(repo.scm, name)
            found = resolve_name(repo.scm, [name]).get(name)
            if found is not None and repo.scm.get_ref(str(found)) == sha:
                return Revision(name, "experiment", sha, str(found))
            return Revision(name, "git", sha)
    except RevError as exc:
        raise StageError(f"{name}: not a git revision, branch or DVC experiment in this "
                         f"repository (see `git branch` and `dvc exp show`): {exc}") from exc
    except DvcException as exc:
        raise StageError(f"{name}: cannot resolve: {exc}") from exc


@dataclass
class Side:
    revision: Revision
    metrics: dict[str, Any]
    scores: dict[str, pd.DataFrame]
    judge: dict[str, Any] = field(default_factory=dict)  # reports/judge.json, where present

    def summary(self) -> dict[str, Any]:
        prov = self.metrics.get("provenance") or {}
        return {**self.revision.to_json(),
                "predictions": prov.get("predictions"),
                "params_fingerprint": prov.get("params_fingerprint"),
                "commit": (prov.get("git") or {}).get("commit")}


def load_side(root: Path, revision: Revision) -> Side:
    from dvc.api import DVCFileSystem
    from dvc.exceptions import DvcException

    where = revision.label if revision.rev is None else f"{revision.label} ({revision.rev[:12]})"
    fs = DVCFileSystem(os.fspath(root.resolve()), rev=revision.rev)

    def read(path: Path) -> bytes:
        try:
            return fs.read_bytes(path.as_posix())
        except (FileNotFoundError, DvcException) as exc:
            why = "not found" if isinstance(exc, FileNotFoundError) else str(exc)
            raise StageError(f"{path.as_posix()}: not readable at {where} ({why}): was the "
                             f"pipeline run and its results committed there, and is the DVC "
                             f"cache complete (`dvc pull`, `dvc exp pull`)?") from exc

    try:
        metrics = json.loads(read(METRICS_PATH))
        scores = {t: pd.read_parquet(io.BytesIO(read(SCORES_DIR / SCORE_FILES[t])))
                  for t in TRACKS}
        judge = json.loads(read(JUDGE_METRICS_PATH)) if fs.exists(
            JUDGE_METRICS_PATH.as_posix()) else {}
    finally:
        fs.close()
    return Side(revision, metrics, scores, judge)


def compare_sides(a: Side, b: Side, samples: int = 1000, seed: int = 0,
                  confidence: float = 0.95) -> dict[str, Any]:
    if samples < 0 or not 0 < confidence < 1:
        raise StageError("compare: --samples must be >= 0 and --confidence in (0, 1)")
    tracks = {t: compare_track(t, a.scores[t], b.scores[t], samples, seed, confidence)
              for t in TRACKS}
    deltas = {name: d for t in TRACKS for name, d in tracks[t]["deltas"].items()}
    return {
        "a": a.summary(), "b": b.summary(),
        "bootstrap": {"samples": samples, "seed": seed, "confidence": confidence},
        "metrics": metric_rows(a.metrics, b.metrics, deltas) + judge_rows(a.judge, b.judge),
        "tracks": tracks,
    }


def compare(root: Path, a: str, b: str, samples: int = 1000, seed: int = 0,
            confidence: float = 0.95) -> dict[str, Any]:
    sides = [load_side(root, resolve(root, name)) for name in (a, b)]
    return compare_sides(*sides, samples=samples, seed=seed, confidence=confidence)


# --- rendering ---------------------------------------------------------------------------------


def fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.6f}" if isinstance(x, float) else str(x)


def fmt_delta(x: Any) -> str:
    return "-" if x is None else f"{x:+.6f}" if isinstance(x, float) else f"{x:+d}"


def fmt_ci(ci: Mapping[str, float] | None) -> str:
    return "-" if not ci else f"[{ci['low']:+.4f}, {ci['high']:+.4f}]"


def fmt_p(p: float) -> str:
    return f"{p:.4g}"


def _side_cells(side: Mapping[str, Any]) -> dict[str, str]:
    rev = side["rev"][:12] if side["rev"] else "working tree"
    cells = {"revision": f"{side['label']} ({side['kind']}, {rev})"}
    for t in TRACKS:
        p = (side.get("predictions") or {}).get(t) or {}
        cells[f"{t} predictions"] = (f"{p.get('backend')} {str(p.get('fingerprint'))[:12]}"
                                     if p else "unknown (no provenance block)")
    cells["params fingerprint"] = str(side.get("params_fingerprint") or "-")[:12]
    return cells


def _md(text: Any) -> str:
    """A Markdown table cell: no raw HTML, pipes or line breaks from ids or labels."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def _md_row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(_md(c) for c in cells) + " |"


def _right(x: bool) -> str:
    return "right" if x else "wrong"


def _unpaired_note(track: str, t: Mapping[str, Any]) -> str | None:
    parts = [f"{len(t[k])} {label}" for k, label in (
        ("only_a", "only in A"), ("only_b", "only in B"),
        ("changed_items", "with changed content")) if t[k]]
    return f"{track}: not paired: " + ", ".join(parts) if parts else None


def render_markdown(result: Mapping[str, Any]) -> str:
    a, b = result["a"], result["b"]
    boot = result["bootstrap"]
    level = f"{boot['confidence'] * 100:g}%"
    out = [f"## RIMO comparison: A = {_md(a['label'])}, B = {_md(b['label'])}", ""]
    ca, cb = _side_cells(a), _side_cells(b)
    out += ["| | A | B |", "| --- | --- | --- |"]
    out += [_md_row([k, ca[k], cb[k]]) for k in ca]
    out += ["", "### Metrics", "", f"| metric | A | B | Δ (B - A) | {level} CI of Δ |",
            "| --- | ---: | ---: | ---: | :---: |"]
    out += [_md_row([r["name"], fmt(r["a"]), fmt(r["b"]), fmt_delta(r["delta"]), fmt_ci(r["ci"])])
            for r in result["metrics"] if r["rate"]]
    out += ["", f"Intervals: paired bootstrap over items, {boot['samples']} resamples, seed "
            f"{boot['seed']}.", "", "<details><summary>counts</summary>", "",
            "| count | A | B | Δ (B - A) |", "| --- | ---: | ---: | ---: |"]
    out += [_md_row([r["name"], fmt(r["a"]), fmt(r["b"]), fmt_delta(r["delta"])])
            for r in result["metrics"] if not r["rate"]]
    out += ["", "</details>", "", "### Paired tests", "",
            "| track | test | paired items | right in A only | right in B only | p (two-sided) |",
            "| --- | --- | ---: | ---: | ---: | ---: |"]
    for track, t in result["tracks"].items():
        test = t["test"]
        out.append(_md_row([track, f"{test['name']} on {test['metric']}", t["paired"],
                            test["right_in_a_only"], test["right_in_b_only"],
                            fmt_p(test["p_value"])]))
    notes = [n for track, t in result["tracks"].items() if (n := _unpaired_note(track, t))]
    if notes:
        out += [""] + [f"- {_md(n)}" for n in notes]
    out += ["", "### Flipped items"]
    for track, t in result["tracks"].items():
        test = t["test"]
        out += ["", f"**{track}** ({test['metric']}): {len(t['flips'])} flipped: "
                f"{test['right_in_a_only']} right in A and wrong in B, "
                f"{test['right_in_b_only']} wrong in A and right in B"]
        if t["flips"]:
            out += ["", "<details><summary>flipped items</summary>", "",
                    "| problem_id | domain | A | B |", "| --- | --- | --- | --- |"]
            out += [_md_row([f["problem_id"], f["domain"] or "-", _right(f["a"]), _right(f["b"])])
                    for f in t["flips"]]
            out += ["", "</details>"]
    return "\n".join(out) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
.neg{color:#b00}.pos{color:#070}caption{text-align:left;font-weight:bold}"""


def _h(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _table(head: Sequence[str], rows: Sequence[Sequence[tuple[str, str]]],
           caption: str | None = None) -> str:
    """``rows`` holds (text, css class) cells; every text is escaped here and only here."""
    cap = f"<caption>{_h(caption)}</caption>" if caption else ""
    th = "".join(f"<th>{_h(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f'<td class="{_h(cls)}">{_h(txt)}</td>' for txt, cls in r)
                   + "</tr>" for r in rows)
    return f"<table>{cap}<thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>\n"


def render_html(result: Mapping[str, Any]) -> str:
    a, b = result["a"], result["b"]
    boot = result["bootstrap"]
    ca, cb = _side_cells(a), _side_cells(b)
    parts = [f"<h1>RIMO comparison: A = {_h(a['label'])}, B = {_h(b['label'])}</h1>",
             _table(["", "A", "B"], [[(k, ""), (ca[k], ""), (cb[k], "")] for k in ca])]

    def sign(x: Any) -> str:
        return "num" + (" neg" if _number(x) and x < 0 else " pos" if _number(x) and x > 0
                        else "")

    parts.append(_table(
        ["metric", "A", "B", "Δ (B - A)", f"{boot['confidence'] * 100:g}% CI of Δ"],
        [[(r["name"], ""), (fmt(r["a"]), "num"), (fmt(r["b"]), "num"),
          (fmt_delta(r["delta"]), sign(r["delta"])), (fmt_ci(r["ci"]), "num")]
         for r in result["metrics"]],
        f"Metrics (paired bootstrap, {boot['samples']} resamples, seed {boot['seed']})"))
    parts.append(_table(
        ["track", "test", "paired items", "right in A only", "right in B only", "p (two-sided)"],
        [[(track, ""), (f"{t['test']['name']} on {t['test']['metric']}", ""),
          (t["paired"], "num"), (t["test"]["right_in_a_only"], "num"),
          (t["test"]["right_in_b_only"], "num"), (fmt_p(t["test"]["p_value"]), "num")]
         for track, t in result["tracks"].items()], "Paired tests"))
    for track, t in result["tracks"].items():
        note = _unpaired_note(track, t)
        if note:
            parts.append(f"<p>{_h(note)}</p>")
        parts.append(_table(
            ["problem_id", "domain", "A", "B"],
            [[(f["problem_id"], ""), (f["domain"] or "-", ""), (_right(f["a"]), ""),
              (_right(f["b"]), "")] for f in t["flips"]],
            f"{track}: {len(t['flips'])} flipped on {t['test']['metric']}"))
    title = _h(f"RIMO comparison: {a['label']} vs {b['label']}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(parts) + "</body></html>\n")


def main(args: argparse.Namespace, params: Mapping[str, Any]) -> int:
    del params  # both sides carry their own params; the workspace's are not consulted
    result = compare(Path("."), args.a, args.b, samples=args.samples, seed=args.seed,
                     confidence=args.confidence)
    if args.html:
        write_text(args.html, render_html(result))
        print(f"compare: wrote {args.html}", file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        print(render_markdown(result), end="")
    return 0


__all__ = ["Revision", "Side", "compare", "compare_sides", "compare_track", "flips",
           "load_side", "mcnemar_exact", "metric_rows", "pair", "paired_bootstrap",
           "ratio_specs", "render_html", "render_markdown", "resolve"]
