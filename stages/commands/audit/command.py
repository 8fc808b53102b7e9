"""``rimo-eval audit``: does every metric in reports/metrics.json still trace back, unbroken, to
the pinned upstream files?

Each metric is recomputed from the per-item scores, the scores from the predictions and items,
and every artifact is checked three ways: its md5 against dvc.lock (what DVC recorded when the
stage ran), its sha256 against the provenance block of metrics.json (what the score stage saw),
and its content against the step before it (item content hashes, prediction item hashes, the
upstream sha256 pinned in params). Any break fails the audit and names the file that broke.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from stages.core import artifacts as A
from stages.core.artifacts import LOCK_PATH, UPSTREAM_FILES
from stages.core.errors import StageError
from stages.core.hashing import file_digest, fingerprint, sha256_file
from stages.core.items import ITEMS_DIR, items_path
from stages.core.predictions import PREDICTIONS_DIR, predictions_path
from stages.core.provenance import package_versions, params_fingerprint, predictions_identity
from stages.core.provenance import upstream_pin as make_upstream_pin
from stages.core.tracks import HEADLINE, TRACK_N, TRACK_P, TRACKS
from stages.fetch import RAW_DIR
from stages.judge.metrics import audit_check as judge_check
from stages.score.stage import (
    METRICS_PATH,
    PLOTS_DIR,
    SCORE_FILES,
    SCORE_SCHEMAS,
    SCORES_DIR,
    _boot_params,
    join_predictions,
    metrics_n,
    metrics_p,
    plot_tables,
    score_n,
    score_p,
)

_MISSING = object()
Status = Literal["ok", "break", "warning"]


# --- findings ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One verified (or failed) link. ``path`` is the artifact to name when it breaks; ``stage``
    is set for a stage's code and params, which every artifact of that stage depends on."""

    status: Status
    kind: str
    path: str
    message: str
    stage: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "kind": self.kind, "path": self.path,
                "stage": self.stage, "message": self.message}


@dataclass
class Ledger:
    checks: list[Check] = field(default_factory=list)

    def add(self, status: Status, kind: str, path: str, message: str,
            stage: str | None = None) -> None:
        self.checks.append(Check(status, kind, path, message, stage))

    def ok(self, kind: str, path: str, message: str, stage: str | None = None) -> None:
        self.add("ok", kind, path, message, stage)

    def broke(self, kind: str, path: str, message: str, stage: str | None = None) -> None:
        self.add("break", kind, path, message, stage)

    def warn(self, kind: str, path: str, message: str, stage: str | None = None) -> None:
        self.add("warning", kind, path, message, stage)

    @property
    def breaks(self) -> list[Check]:
        return [c for c in self.checks if c.status == "break"]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status == "warning"]


# --- DVC hashes --------------------------------------------------------------------------------


def md5_file(path: str | os.PathLike[str]) -> str:
    return file_digest(path, "md5")


class DvcHasher:
    """md5 the way dvc.lock records it: a file's plain md5; a folder's md5 of DVC's sorted
    JSON listing of (relpath, md5) plus '.dir', skipping what .dvcignore excludes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, str | None] = {}
        self._ignore: Any = None

    def _walk(self, top: Path) -> Iterable[Path]:
        if self._ignore is None:
            from dvc.fs import LocalFileSystem
            from dvc.ignore import DvcIgnoreFilter
            self._fs = LocalFileSystem()
            self._ignore = DvcIgnoreFilter(self._fs, os.fspath(self.root.resolve()))
        for base, _dirs, files in self._ignore.walk(self._fs, os.fspath(top.resolve())):
            for name in files:
                yield Path(base) / name

    def listing(self, rel: str) -> dict[str, str]:
        """relpath -> md5 of every file DVC would hash under the folder ``rel``."""
        top = (self.root / rel).resolve()
        return {p.relative_to(top).as_posix(): md5_file(p) for p in self._walk(top)}

    def md5(self, rel: str) -> str | None:
        if rel not in self._cache:
            path = self.root / rel
            if path.is_file():
                self._cache[rel] = md5_file(path)
            elif path.is_dir():
                entries = [{"md5": m, "relpath": r} for r, m in sorted(self.listing(rel).items())]
                listing = json.dumps(entries, sort_keys=True).encode("utf-8")
                self._cache[rel] = hashlib.md5(listing).hexdigest() + ".dir"
            else:
                self._cache[rel] = None
        return self._cache[rel]

    def cached_listing(self, dir_md5: str) -> dict[str, str] | None:
        """The folder listing DVC stored in its local cache for ``dir_md5``, if it is there."""
        obj = self.root / ".dvc/cache/files/md5" / dir_md5[:2] / dir_md5[2:]
        try:
            return {e["relpath"]: e["md5"] for e in json.loads(obj.read_text(encoding="utf-8"))}
        except (OSError, ValueError, KeyError, TypeError):
            return None


# --- dvc.lock ----------------------------------------------------------------------------------


def load_lock(root: Path) -> dict[str, Any] | None:
    path = root / LOCK_PATH
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise StageError(f"{LOCK_PATH}: invalid YAML: {exc}") from exc
    return data if isinstance(data.get("stages"), dict) else None


def _covers(out: str, path: str) -> bool:
    return path == out or path.startswith(out.rstrip("/") + "/")


def producer(lock: Mapping[str, Any], path: str) -> str | None:
    """The lock stage whose outputs include ``path`` (or a folder holding it)."""
    for name, stage in lock["stages"].items():
        if any(_covers(o["path"], path) for o in stage.get("outs") or []):
            return name
    return None


def upstream_stages(lock: Mapping[str, Any], target: str) -> list[str]:
    """The stage producing ``target`` and every stage it transitively depends on, in lock order.
    Later stages (the report) are not part of where a metric came from."""
    start = producer(lock, target)
    if start is None:
        return []
    seen, todo = {start}, [start]
    while todo:
        for dep in lock["stages"][todo.pop()].get("deps") or []:
            src = producer(lock, dep["path"])
            if src is not None and src not in seen:
                seen.add(src)
                todo.append(src)
    return [name for name in lock["stages"] if name in seen]


def lookup(data: Any, dotted: str) -> Any:
    """A params value by DVC's key: a section name or a dotted path into it."""
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return _MISSING
        data = data[part]
    return data


def lock_param(lock: Mapping[str, Any], stage: str, key: str) -> Any:
    """A params value as dvc.lock recorded it for ``stage`` (under a section or dotted key)."""
    for values in (lock["stages"][stage].get("params") or {}).values():
        for recorded, value in (values or {}).items():
            if key == recorded:
                return value
            if key.startswith(f"{recorded}."):
                found = lookup(value, key[len(recorded) + 1:])
                if found is not _MISSING:
                    return found
    return _MISSING


def first_difference(recorded: Any, current: Any, key: str) -> tuple[str, Any, Any] | None:
    if isinstance(recorded, dict) and isinstance(current, dict):
        for k in [*recorded, *(k for k in current if k not in recorded)]:
            diff = first_difference(recorded.get(k, _MISSING), current.get(k, _MISSING),
                                    f"{key}.{k}")
            if diff:
                return diff
        return None
    return None if recorded == current else (key, recorded, current)


def _shown(value: Any) -> str:
    return "(absent)" if value is _MISSING else repr(value)


def changed_files(hasher: DvcHasher, path: str, want: str) -> list[tuple[str, str]]:
    """(path, what differs) for a mismatch; inside a folder, down to the files that changed
    when DVC's cache still has the folder listing the lock refers to."""
    got = hasher.md5(path)
    old = hasher.cached_listing(want) if want.endswith(".dir") else None
    if old is None:
        return [(path, f"md5 on disk {got} differs from")]
    now = hasher.listing(path)
    out = []
    for relpath in sorted(old.keys() | now.keys()):
        if old.get(relpath) != now.get(relpath):
            state = ("missing, but listed in" if relpath not in now else
                     "not listed in" if relpath not in old else
                     f"md5 on disk {now[relpath]} (was {old[relpath]}) differs from")
            out.append((f"{path}/{relpath}", state))
    return out or [(path, f"md5 on disk {got} differs from")]


def check_lock(ledger: Ledger, root: Path, lock: Mapping[str, Any], stages: Iterable[str],
               hasher: DvcHasher, artifacts: set[str]) -> None:
    """Every dep and out of ``stages`` on disk against dvc.lock, and its params against the
    params files now: a mismatch means an edited artifact or a lock older than its inputs."""
    params_files: dict[str, Any] = {}
    for name in stages:
        stage = lock["stages"][name]
        for kind in ("deps", "outs"):
            for entry in stage.get(kind) or []:
                path, want = entry["path"], entry.get("md5")
                # A stage's own code is an input of all it makes; data is named by its path.
                owner = None if kind == "outs" or any(_covers(path, a) for a in artifacts) \
                    else name
                if entry.get("hash", "md5") != "md5" or not want:
                    ledger.warn("lock", path, f"{path}: dvc.lock ({name} {kind}) records no "
                                f"plain md5; not checked", owner)
                    continue
                got = hasher.md5(path)
                if got is None:
                    ledger.broke("lock", path, f"{path}: missing on disk; dvc.lock ({name} "
                                 f"{kind}) expects md5 {want}", owner)
                elif got != want:
                    for file, detail in changed_files(hasher, path, want):
                        ledger.broke("lock", file, f"{file}: {detail} dvc.lock ({name} {kind}: "
                                     f"{want}): changed after the stage ran (edited by hand, "
                                     f"or the lock is stale)", owner)
                else:
                    ledger.ok("lock", path, f"{path}: md5 matches dvc.lock ({name} {kind})",
                              owner)
        for pfile, values in (stage.get("params") or {}).items():
            if pfile not in params_files:
                try:
                    params_files[pfile] = yaml.safe_load(
                        (root / pfile).read_text(encoding="utf-8")) or {}
                except (OSError, yaml.YAMLError) as exc:
                    ledger.broke("lock-params", pfile, f"{pfile}: cannot read ({exc})", name)
                    params_files[pfile] = {}
            for key, recorded in (values or {}).items():
                diff = first_difference(recorded, lookup(params_files[pfile], key), key)
                if diff:
                    where, old, now = diff
                    ledger.broke("lock-params", str(LOCK_PATH),
                                 f"dvc.lock is stale: {pfile} {where} is {_shown(now)}, dvc.lock "
                                 f"({name}) recorded {_shown(old)}; rerun `dvc repro`", name)
                else:
                    ledger.ok("lock-params", str(LOCK_PATH),
                              f"{pfile} {key} matches dvc.lock ({name})", name)


# --- the content chain -------------------------------------------------------------------------


def rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def check_upstream(ledger: Ledger, root: Path, pin: Mapping[str, Any] | None
                   ) -> dict[str, str | None]:
    """The fetched files against the sha256 pinned in params (what makes items 'the benchmark')."""
    hashes: dict[str, str | None] = {}
    if not pin or not pin.get("sha256"):
        ledger.broke("upstream", "params.yaml", "params.yaml: no fetch.sha256 pins to check "
                     "the upstream files against")
        return hashes
    for name, want in pin["sha256"].items():
        path = (RAW_DIR / name).as_posix()
        if not (root / path).is_file():
            ledger.broke("upstream", path, f"{path}: missing (run `dvc repro`)")
            hashes[name] = None
            continue
        got = hashes[name] = sha256_file(root / path)
        if got != want:
            ledger.broke("upstream", path, f"{path}: sha256 {got} differs from the pin in "
                         f"params.yaml fetch.sha256 ({want})")
        else:
            ledger.ok("upstream", path, f"{path}: sha256 matches the pin in params.yaml")
    return hashes


def check_items(ledger: Ledger, path: Path, shown: str) -> pd.DataFrame | None:
    """Every item row against its own content_hash (the hash predictions are tied to)."""
    if not path.is_file():
        ledger.broke("items", shown, f"{shown}: missing (run `dvc repro`)")
        return None
    rows = pq.read_table(path).to_pylist()
    bad = [r["problem_id"] for r in rows
           if fingerprint({k: v for k, v in r.items() if k != "content_hash"})
           != r["content_hash"]]
    if bad:
        ledger.broke("items", shown, f"{shown}: {len(bad)} rows do not match their "
                     f"content_hash (edited items): {_ids(bad)}")
    else:
        ledger.ok("items", shown, f"{shown}: {len(rows)} content hashes recompute")
    return pd.read_parquet(path)


def _ids(ids: list[str], limit: int = 10) -> str:
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def check_predictions(ledger: Ledger, track: str, items: pd.DataFrame | None, path: Path,
                      shown: str, lock_backend: Any) -> pd.DataFrame | None:
    if not path.is_file():
        ledger.broke("predictions", shown, f"{shown}: missing (run `dvc repro`)")
        return None
    preds = pd.read_parquet(path)
    ident = predictions_identity(preds)
    if any("+" in (v or "") for v in ident.values()):
        ledger.broke("predictions", shown, f"{shown}: rows from several backends or "
                     f"fingerprints ({ident}); one predict run writes one")
    if lock_backend is not _MISSING and ident["backend"] not in (None, lock_backend):
        ledger.broke("predictions", shown, f"{shown}: made by backend {ident['backend']!r}, "
                     f"but dvc.lock says predict.backend {lock_backend!r}")
    # The default identity is backend + params; richer ones (templates, replay file hashes)
    # are vouched for by the predict stage's lock entries instead.
    rows = preds[["backend", "backend_params", "fingerprint"]].drop_duplicates()
    recomputable = {fingerprint({"backend": r.backend, "params": json.loads(r.backend_params)})
                    == r.fingerprint for r in rows.itertuples()}
    note = ("fingerprint recomputes from backend + params" if recomputable == {True}
            else "fingerprint covers backend-specific identity (vouched for by dvc.lock)")
    if items is not None:
        try:
            join_predictions(items, preds, track)
        except StageError as exc:
            ledger.broke("predictions", shown, f"{shown}: does not fit the items: {exc}")
            return preds
    ledger.ok("predictions", shown, f"{shown}: item hashes match the items; {note}")
    return preds


def _table_rows(df: pd.DataFrame, track: str) -> dict[str, dict[str, Any]]:
    table = pa.Table.from_pandas(df, schema=SCORE_SCHEMAS[track], preserve_index=False)
    return {r["problem_id"]: r for r in table.to_pylist()}


def check_scores(ledger: Ledger, track: str, items: pd.DataFrame | None,
                 preds: pd.DataFrame | None, path: Path, shown: str, sources: str
                 ) -> pd.DataFrame | None:
    """The scores file against a fresh grading of the predictions on disk."""
    if not path.is_file():
        ledger.broke("scores", shown, f"{shown}: missing (run `dvc repro`)")
        return None
    scores = pd.read_parquet(path)
    if items is None or preds is None:
        return scores
    try:
        fresh = (score_n if track == TRACK_N else score_p)(items, preds)
    except StageError:
        return scores  # already reported against the predictions
    want = _table_rows(fresh, track)
    try:
        have = {r["problem_id"]: r for r in pq.read_table(path).to_pylist()}
    except (pa.ArrowInvalid, KeyError) as exc:
        ledger.broke("scores", shown, f"{shown}: unreadable as a scores table ({exc})")
        return scores
    differ = sorted(pid for pid in want.keys() | have.keys() if want.get(pid) != have.get(pid))
    if differ:
        cols = sorted({c for pid in differ if pid in want and pid in have
                       for c in want[pid] if want[pid][c] != have[pid].get(c)})
        ledger.broke("scores", shown, f"{shown}: does not recompute from {sources}: "
                     f"{len(differ)} rows differ ({_ids(differ)})"
                     + (f" in {', '.join(cols)}" if cols else ""))
    else:
        ledger.ok("scores", shown, f"{shown}: recomputes from {sources}")
    return scores


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        # Both sides went through the same rounding; the tolerance only absorbs summation order.
        return math.isclose(a, b, rel_tol=0, abs_tol=1e-9)
    return bool(a == b)


def recompute_metrics(scores: Mapping[str, pd.DataFrame], totals: Mapping[str, int],
                      boot: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics block exactly as the score stage derives it from the per-item scores."""
    metrics = {TRACK_N: metrics_n(scores[TRACK_N], dict(boot)),
               TRACK_P: metrics_p(scores[TRACK_P], dict(boot))}
    evaluated = {t: len(scores[t]) for t in TRACKS}
    metrics["sample"] = {"evaluated": evaluated, "total": dict(totals),
                         "is_sample": evaluated != dict(totals)}
    return metrics


@dataclass
class MetricResult:
    name: str
    value: Any
    recomputed: Any
    recomputes: bool
    tracks: tuple[str, ...]
    ok: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value,
                "recomputed": None if self.recomputed is _MISSING else self.recomputed,
                "recomputes": self.recomputes, "tracks": list(self.tracks), "ok": self.ok}


def metric_tracks(name: str) -> tuple[str, ...]:
    head = name.split(".", 1)[0]
    return (head,) if head in TRACKS else TRACKS


def check_metrics(ledger: Ledger, metrics: Mapping[str, Any], fresh: Mapping[str, Any],
                  shown: str, sources: Mapping[str, str]) -> list[MetricResult]:
    have = flatten({k: v for k, v in metrics.items() if k != "provenance"})
    want = flatten(fresh)
    results = []
    for name in [*have, *(k for k in want if k not in have)]:
        value, again = have.get(name, _MISSING), want.get(name, _MISSING)
        tracks = metric_tracks(name)
        src = " and ".join(sources[t] for t in tracks)
        ok = value is not _MISSING and again is not _MISSING and same_value(value, again)
        results.append(MetricResult(name, None if value is _MISSING else value, again, ok,
                                    tracks))
        if ok:
            continue
        if value is _MISSING:
            msg = f"{shown}: {name} is missing; it recomputes to {again!r} from {src}"
        elif again is _MISSING:
            msg = f"{shown}: {name} = {value!r} is not a metric the scores produce"
        else:
            msg = (f"{shown}: {name} = {value!r} does not recompute: {src} give {again!r} "
                   f"(metric edited, or scores changed after it was written)")
        ledger.broke("metric", shown, msg)
    return results


def check_plots(ledger: Ledger, root: Path, fresh: Mapping[str, Any]) -> None:
    for name, text in plot_tables(dict(fresh)).items():
        path = root / PLOTS_DIR / name
        shown = rel(path, root)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            ledger.broke("plots", shown, f"{shown}: does not recompute from the metrics")
        else:
            ledger.ok("plots", shown, f"{shown}: recomputes from the metrics")


def _commit_known(root: Path, commit: str) -> bool | None:
    try:
        proc = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=root,
                              capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.returncode == 0


def check_provenance(ledger: Ledger, root: Path, prov: Any, shown: str, *,
                     expected_inputs: Iterable[str], expected_outputs: Iterable[str],
                     identities: Mapping[str, Mapping[str, Any]],
                     pin: Mapping[str, Any] | None, score_params: Mapping[str, Any]) -> None:
    """The block metrics.json carries against the files and params it describes."""
    if not isinstance(prov, dict):
        ledger.broke("provenance", shown, f"{shown}: no provenance block (written by an older "
                     f"score stage: rerun `dvc repro -f -s score`)")
        return
    for section, expected in (("inputs", expected_inputs), ("outputs", expected_outputs)):
        recorded = prov.get(section) or {}
        for path in expected:
            want = recorded.get(path)
            if want is None:
                ledger.broke("provenance", shown, f"{shown}: provenance {section} do not list "
                             f"{path}")
                continue
            got = sha256_file(root / path) if (root / path).is_file() else None
            if got != want:
                ledger.broke("provenance", path, f"{path}: sha256 {got} differs from the one "
                             f"{shown} was computed from ({want})")
            else:
                ledger.ok("provenance", path, f"{path}: sha256 matches {shown} provenance")
    for track, ident in identities.items():
        rec = (prov.get("predictions") or {}).get(track)
        if rec != dict(ident):
            ledger.broke("provenance", shown, f"{shown}: provenance says {track} predictions "
                         f"came from {rec}, the predictions file says {dict(ident)}")
    checks = (("upstream", prov.get("upstream"), pin, "params.yaml fetch"),
              ("params", prov.get("params"), {"score": dict(score_params)}, "params.yaml"))
    for what, rec, now, where in checks:
        if rec != now:
            diff = first_difference(rec, now, what) or (what, rec, now)
            ledger.broke("provenance", shown, f"{shown}: provenance {diff[0]} is "
                         f"{_shown(diff[1])}, {where} now says {_shown(diff[2])}")
    fp = params_fingerprint(prov.get("upstream"), prov.get("predictions") or {},
                            (prov.get("params") or {}).get("score") or {})
    if prov.get("params_fingerprint") != fp:
        ledger.broke("provenance", shown, f"{shown}: params_fingerprint "
                     f"{prov.get('params_fingerprint')} does not match the params it lists "
                     f"({fp})")
    commit = (prov.get("git") or {}).get("commit")
    if commit and _commit_known(root, commit) is False:
        ledger.warn("provenance", shown, f"{shown}: made at commit {commit}, which this "
                    f"repository does not have (a copied metrics file?)")
    now_versions = package_versions()
    for pkg, version in (prov.get("packages") or {}).items():
        if now_versions.get(pkg, version) != version:
            ledger.warn("provenance", shown, f"{shown}: made with {pkg} {version}, this "
                        f"environment has {now_versions.get(pkg)} (the metrics still "
                        f"recompute: see above)")
    ledger.ok("provenance", shown, f"{shown}: provenance block checked")


# --- chains and the report ---------------------------------------------------------------------


@dataclass
class Link:
    kind: str  # scores | predictions | items | upstream
    path: str
    sha256: str | None
    detail: str
    paths: tuple[str, ...]  # every path whose breaks belong to this link
    stage: str | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "sha256": self.sha256,
                "detail": self.detail, "stage": self.stage, "ok": self.ok,
                "problems": self.problems}


@dataclass
class AuditReport:
    metrics_path: str
    metrics: list[MetricResult]
    chains: dict[str, list[Link]]
    ledger: Ledger
    provenance: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return not self.ledger.breaks

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "metrics_file": self.metrics_path,
            "checks": len(self.ledger.checks),
            "breaks": [c.to_json() for c in self.ledger.breaks],
            "warnings": [c.to_json() for c in self.ledger.warnings],
            "chains": {t: [link.to_json() for link in links] for t, links in self.chains.items()},
            "metrics": [m.to_json() for m in self.metrics],
            "provenance": {k: (self.provenance or {}).get(k)
                           for k in ("git", "params_fingerprint", "packages")},
        }

    def render(self) -> str:
        breaks = self.ledger.breaks
        head = (f"audit: OK: {len(self.metrics)} metrics in {self.metrics_path} recompute and "
                f"every hash chain holds ({len(self.ledger.checks)} checks)" if self.ok else
                f"audit: FAILED: {len(breaks)} break(s) in the chains of {self.metrics_path}")
        lines = [head, ""]
        by_name = {m.name: m for m in self.metrics}
        for track in TRACKS:
            for key in HEADLINE[track]:
                m = by_name.get(f"{track}.{key}")
                if m is not None:
                    lines += self._render_chain(m)
            rest = [m for m in self.metrics if m.tracks == (track,)
                    and m.name.split(".", 1)[1] not in HEADLINE[track]]
            lines.append(f"{track}: {sum(m.recomputes for m in rest)}/{len(rest)} more "
                         f"metrics recompute"
                         + "".join(f"\n  BROKEN {m.name} = {m.value!r} (recomputes to "
                                   f"{_shown(m.recomputed)})" for m in rest if not m.recomputes))
            lines.append("")
        shared = [m for m in self.metrics if m.tracks == TRACKS]
        if shared:
            lines.append(f"{' + '.join(TRACKS)}: {sum(m.recomputes for m in shared)}/"
                         f"{len(shared)} sample counts recompute"
                         + "".join(f"\n  BROKEN {m.name} = {m.value!r}" for m in shared
                                   if not m.recomputes))
        prov = self.provenance or {}
        git = prov.get("git") or {}
        if prov:
            lines.append(f"{self.metrics_path} provenance: commit {git.get('commit')}"
                         f"{' (sources dirty)' if git.get('dirty') else ''}, params fingerprint "
                         f"{str(prov.get('params_fingerprint'))[:12]}, packages "
                         + ", ".join(f"{k} {v}" for k, v in (prov.get("packages") or {}).items()))
        if breaks:
            lines += ["", "breaks:"] + [f"  {i}. {c.message}" for i, c in enumerate(breaks, 1)]
        if self.ledger.warnings:
            lines += ["", "warnings:"] + [f"  - {c.message}" for c in self.ledger.warnings]
        return "\n".join(lines).rstrip() + "\n"

    def _render_chain(self, m: MetricResult) -> list[str]:
        status = ("ok" if m.ok else "recomputes, but its chain is BROKEN" if m.recomputes
                  else f"BROKEN: recomputes to {_shown(m.recomputed)}")
        lines = [f"{m.name} = {m.value!r}  [{status}]"]
        links = self.chains.get(m.tracks[0], [])
        width = max((len(link.path) for link in links), default=0)
        for link in links:
            sha = f"sha256 {link.sha256[:12]}" if link.sha256 else ""
            mark = "ok" if link.ok else f"BROKEN: {len(link.problems)} break(s) below"
            text = "  ".join(x for x in (sha, link.detail) if x)
            lines.append(f"  <- {link.kind:<11} {link.path:<{width}}  {text}  [{mark}]")
        return lines


def _attach(chains: Mapping[str, list[Link]], ledger: Ledger) -> None:
    for links in chains.values():
        for link in links:
            link.problems = [c.message for c in ledger.breaks
                             if c.path in link.paths
                             or (c.stage is not None and c.stage == link.stage)]


def audit(root: Path = Path("."), params: Mapping[str, Any] | None = None) -> AuditReport:
    root = Path(root)
    metrics_shown = METRICS_PATH.as_posix()
    if not (root / METRICS_PATH).is_file():
        raise StageError(f"{metrics_shown}: not found (run `dvc repro` first)")
    try:
        metrics = json.loads((root / METRICS_PATH).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise StageError(f"{metrics_shown}: not valid JSON: {exc}") from exc
    params = params or {}
    ledger = Ledger()
    pin = make_upstream_pin(params.get("fetch"))
    boot = _boot_params(params.get("score") or {})
    paths = {t: {"items": root / items_path(t, ITEMS_DIR),
                 "predictions": root / predictions_path(t, PREDICTIONS_DIR),
                 "scores": root / SCORES_DIR / SCORE_FILES[t]} for t in TRACKS}
    shown = {t: {k: rel(p, root) for k, p in v.items()} for t, v in paths.items()}
    artifacts = {s for v in shown.values() for s in v.values()} | {RAW_DIR.as_posix()}

    lock = load_lock(root)
    lock_backend: Any = _MISSING
    if lock is None:
        ledger.broke("lock", str(LOCK_PATH), f"{LOCK_PATH}: missing or without stages "
                     f"(run `dvc repro`)")
    else:
        stages = upstream_stages(lock, metrics_shown)
        if not stages:
            ledger.broke("lock", str(LOCK_PATH), f"{LOCK_PATH}: no stage outputs "
                         f"{metrics_shown}")
        check_lock(ledger, root, lock, stages, DvcHasher(root), artifacts)
        pstage = producer(lock, shown[TRACK_N]["predictions"])
        if pstage is not None:
            lock_backend = lock_param(lock, pstage, "predict.backend")

    raw = check_upstream(ledger, root, pin)
    items, preds, scores = {}, {}, {}
    for t in TRACKS:
        items[t] = check_items(ledger, paths[t]["items"], shown[t]["items"])
        preds[t] = check_predictions(ledger, t, items[t], paths[t]["predictions"],
                                     shown[t]["predictions"], lock_backend)
        sources = f"{shown[t]['predictions']} and {shown[t]['items']}"
        scores[t] = check_scores(ledger, t, items[t], preds[t], paths[t]["scores"],
                                 shown[t]["scores"], sources)

    results: list[MetricResult] = []
    if all(scores[t] is not None for t in TRACKS):
        totals = {t: len(items[t]) if items[t] is not None else 0 for t in TRACKS}
        fresh = recompute_metrics({t: scores[t] for t in TRACKS}, totals, boot)
        results = check_metrics(ledger, metrics, fresh, metrics_shown,
                                {t: shown[t]["scores"] for t in TRACKS})
        check_plots(ledger, root, fresh)
    # The opt-in judge's metrics (reports/judge.json) against its own table.
    judged = judge_check(root / A.JUDGE_TABLE, root / A.JUDGE_METRICS_PATH, boot)
    if judged is not None:
        (ledger.ok if judged[0] else ledger.broke)("judge", A.JUDGE_METRICS_PATH.as_posix(),
                                                   judged[1])
    identities = {t: predictions_identity(preds[t]) for t in TRACKS if preds[t] is not None}
    prov = metrics.get("provenance")
    check_provenance(ledger, root, prov, metrics_shown,
                     expected_inputs=[shown[t][k] for k in ("items", "predictions")
                                      for t in TRACKS],
                     expected_outputs=[shown[t]["scores"] for t in TRACKS],
                     identities=identities, pin=pin, score_params={"bootstrap": boot})

    chains = build_chains(root, lock, shown, identities, pin, raw)
    _attach(chains, ledger)
    metric_level = [c for c in ledger.breaks if c.path == metrics_shown]
    for m in results:
        m.ok = m.recomputes and not metric_level and all(
            link.ok for t in m.tracks for link in chains[t])
    return AuditReport(metrics_shown, results, chains, ledger,
                       prov if isinstance(prov, dict) else None)


def build_chains(root: Path, lock: Mapping[str, Any] | None, shown: Mapping[str, dict[str, str]],
                 identities: Mapping[str, Mapping[str, Any]], pin: Mapping[str, Any] | None,
                 raw: Mapping[str, str | None]) -> dict[str, list[Link]]:
    """Per track: scores <- predictions (+ backend, fingerprint) <- items <- upstream pin."""
    def sha(path: str) -> str | None:
        return sha256_file(root / path) if (root / path).is_file() else None

    def stage_of(path: str) -> str | None:
        return producer(lock, path) if lock else None

    chains: dict[str, list[Link]] = {}
    raw_dir = RAW_DIR.as_posix()
    for t in TRACKS:
        ident = identities.get(t) or {}
        s, p, i = shown[t]["scores"], shown[t]["predictions"], shown[t]["items"]
        files = UPSTREAM_FILES[t]
        up = ", ".join(f"{name} {str(raw.get(name))[:12]}" for name in files)
        revision = f"{(pin or {}).get('repo')}@{str((pin or {}).get('revision'))[:12]}"
        chains[t] = [
            Link("scores", s, sha(s), "", (s,), stage_of(s)),
            Link("predictions", p, sha(p), f"backend {ident.get('backend')}, fingerprint "
                 f"{str(ident.get('fingerprint'))[:12]}", (p,), stage_of(p)),
            Link("items", i, sha(i), "", (i,), stage_of(i)),
            Link("upstream", raw_dir, None, f"{revision} {up}",
                 (raw_dir, *(f"{raw_dir}/{name}" for name in files), "params.yaml"),
                 stage_of(raw_dir)),
        ]
    return chains


def main(args: argparse.Namespace, params: Mapping[str, Any]) -> int:
    report = audit(Path("."), params)
    if getattr(args, "json", False):
        print(json.dumps(report.to_json(), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        print(report.render(), end="")
    return 0 if report.ok else 1


__all__ = ["AuditReport", "Check", "DvcHasher", "Ledger", "Link", "MetricResult", "audit",
           "build_chains", "check_lock", "check_metrics", "check_scores", "first_difference",
           "flatten", "load_lock", "main", "recompute_metrics", "upstream_stages"]
