"""``rimo-eval audit``: does every metric in reports/metrics.json still trace back, unbroken, to
the pinned upstream files?

Each metric is recomputed from the per-item scores, the scores from the predictions and items,
and every artifact is checked three ways: its md5 against dvc.lock (what DVC recorded when the
stage ran), its sha256 against reports/provenance.json (what the score stage saw; metrics.json
names that file and its sha256), and its content against the step before it (item content
hashes, prediction item hashes and fingerprint, the upstream sha256 pinned in params). Any break
fails the audit and names the file that broke. The checks live in lock, content, recompute and
provenance; this module chains them and builds the per-metric chains that render shows.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dvc.exceptions import DvcException

from rimo_eval.artifacts.metrics_files import POINTER_KEY, pointer, split
from rimo_eval.artifacts.paths import (
    BREAKDOWN_PATH,
    JUDGE_TABLE,
    LOCK_PATH,
    METRICS_PATH,
    PARAMS_PATH,
    PROVENANCE_PATH,
    RAW_DIR,
    UPSTREAM_FILES,
    items_path,
    predictions_path,
    scores_path,
)
from rimo_eval.artifacts.provenance import predictions_identity
from rimo_eval.artifacts.provenance import upstream_pin as make_upstream_pin
from rimo_eval.commands.audit.content import (
    check_items,
    check_predictions,
    check_scores,
    check_upstream,
)
from rimo_eval.commands.audit.ledger import CHECKS, MISSING, Check, Ledger
from rimo_eval.commands.audit.lock import (
    DvcHashes,
    check_lock,
    first_difference,
    load_lock,
    lock_param,
    producer,
    upstream_stages,
)
from rimo_eval.commands.audit.provenance import check_provenance
from rimo_eval.commands.audit.recompute import (
    MetricResult,
    check_judge,
    check_metrics,
    check_plots,
    recompute_metrics,
)
from rimo_eval.commands.audit.render import AuditReport, Link
from rimo_eval.commands.audit.revision import checked_out
from rimo_eval.io.hashing import sha256_file
from rimo_eval.io.json_object import read_object
from rimo_eval.io.terminal import for_terminal, json_for_terminal
from rimo_eval.params.config import Params, load_params
from rimo_eval.rimo.tracks import TRACK_N, TRACKS
from rimo_eval.run.reader import RunReader
from rimo_eval.run.revision import WORKSPACE
from rimo_eval.stats import bootstrap_params


def _read_json(root: Path, path: Path, required: bool = True) -> dict[str, Any] | None:
    if not required and not (root / path).is_file():
        return None
    return read_object(root / path, path.as_posix(), "run `dvc repro` first")


def _read_metrics(root: Path) -> dict[str, Any]:
    return _read_json(root, METRICS_PATH) or {}


def _check_pointer(ledger: Ledger, root: Path, metrics: Mapping[str, Any],
                   prov_found: bool) -> None:
    """metrics.json's [path, sha256] names the provenance file as it is on disk."""
    where = METRICS_PATH.as_posix()
    want = pointer(sha256_file(root / PROVENANCE_PATH)) if prov_found else None
    got = metrics.get(POINTER_KEY)
    ledger.verdict(want is not None and got == want, "provenance.pointer", where,
                   f"{where}: names {PROVENANCE_PATH.as_posix()} and its sha256",
                   f"{where}: {POINTER_KEY} is {got!r}, the provenance file on disk is "
                   f"{want!r} (edited, or not from the same score run)")


def _check_lock_chain(ledger: Ledger, root: Path, shown: Mapping[str, dict[str, str]],
                      artifacts: set[str]) -> tuple[dict[str, Any] | None, Any]:
    """dvc.lock's view: the stages upstream of the metrics; returns the lock and its
    predict.backend (MISSING when unknown)."""
    metrics_shown = METRICS_PATH.as_posix()
    lock = load_lock(root)
    if lock is None:
        ledger.broke("lock.present", str(LOCK_PATH), f"{LOCK_PATH}: missing or without stages "
                     f"(run `dvc repro`)")
        return None, MISSING
    stages = upstream_stages(lock, metrics_shown)
    if not ledger.verdict(bool(stages), "lock.present", str(LOCK_PATH),
                          f"{LOCK_PATH}: stages {', '.join(stages)} made {metrics_shown}",
                          f"{LOCK_PATH}: no stage outputs {metrics_shown}"):
        return lock, MISSING
    try:
        hashes = DvcHashes(root)
    except DvcException as exc:
        ledger.broke("lock.md5", str(LOCK_PATH), f"{LOCK_PATH}: DVC cannot open the repository "
                     f"to hash its files: {exc}")
        return lock, MISSING
    try:
        check_lock(ledger, root, lock, stages, hashes, artifacts)
    finally:
        hashes.close()
    pstage = producer(lock, shown[TRACK_N]["predictions"])
    return lock, MISSING if pstage is None else lock_param(lock, pstage, "predict.backend")


def audit(root: Path = Path("."), params: Params | None = None) -> AuditReport:
    root = Path(root)
    metrics_shown = METRICS_PATH.as_posix()
    metrics = _read_metrics(root)
    breakdown = _read_json(root, BREAKDOWN_PATH, required=False)
    prov = _read_json(root, PROVENANCE_PATH, required=False)
    breakdown_shown, prov_shown = BREAKDOWN_PATH.as_posix(), PROVENANCE_PATH.as_posix()
    ledger = Ledger()
    predict_cfg = None if params is None else params.predict
    score_cfg = None if params is None else params.score
    pin = make_upstream_pin(None if params is None else params.fetch)
    boot = bootstrap_params(score_cfg)
    shown = {t: {"items": items_path(t).as_posix(), "predictions": predictions_path(t).as_posix(),
                 "scores": scores_path(t).as_posix()} for t in TRACKS}
    paths = {t: {k: root / p for k, p in v.items()} for t, v in shown.items()}
    artifacts = {s for v in shown.values() for s in v.values()} | {RAW_DIR.as_posix()}

    lock, lock_backend = _check_lock_chain(ledger, root, shown, artifacts)
    raw = check_upstream(ledger, root, pin)
    items, preds, scores = {}, {}, {}
    for t in TRACKS:
        items[t] = check_items(ledger, paths[t]["items"], shown[t]["items"])
        preds[t] = check_predictions(ledger, root, t, items[t], paths[t]["predictions"],
                                     shown[t]["predictions"], lock_backend, predict_cfg)
        sources = f"{shown[t]['predictions']} and {shown[t]['items']}"
        scores[t] = check_scores(ledger, t, items[t], preds[t], paths[t]["scores"],
                                 shown[t]["scores"], sources)

    results: list[MetricResult] = []
    if all(scores[t] is not None for t in TRACKS):
        totals = {t: len(i) if (i := items[t]) is not None else 0 for t in TRACKS}
        fresh = recompute_metrics({t: s for t in TRACKS if (s := scores[t]) is not None},
                                  totals, boot,
                                  {t: p for t in TRACKS if (p := preds[t]) is not None}
                                  if all(preds[t] is not None for t in TRACKS) else None,
                                  predict_cfg, score_cfg)
        # Each file against its part of the fresh block, so a break names the file.
        fresh_metrics, fresh_breakdown = split(fresh)
        score_files = {t: shown[t]["scores"] for t in TRACKS}
        results = check_metrics(ledger, metrics, fresh_metrics, metrics_shown, score_files)
        if breakdown is None:
            ledger.broke("metrics.recompute", breakdown_shown, f"{breakdown_shown}: not found "
                         f"(written by the score stage: rerun `dvc repro -f -s score`)")
        else:
            results += check_metrics(ledger, breakdown, fresh_breakdown, breakdown_shown,
                                     score_files)
        check_plots(ledger, root, fresh)
    check_judge(ledger, root, boot)
    identities = {t: predictions_identity(p) for t in TRACKS if (p := preds[t]) is not None}
    _check_pointer(ledger, root, metrics, prov is not None)
    check_provenance(ledger, root, prov, prov_shown,
                     expected_inputs=[shown[t][k] for k in ("items", "predictions")
                                      for t in TRACKS],
                     expected_outputs=[shown[t]["scores"] for t in TRACKS],
                     identities=identities, pin=pin, score_params={"bootstrap": boot})

    chains = build_chains(root, lock, shown, identities, pin, raw)
    _attach(chains, ledger)
    metric_level = [c for c in ledger.breaks
                    if c.path in (metrics_shown, breakdown_shown, prov_shown)]
    for m in results:
        m.ok = m.recomputes and not metric_level and all(
            link.ok for t in m.tracks for link in chains[t])
    return AuditReport(metrics_shown, results, chains, ledger,
                       prov if isinstance(prov, dict) else None)


def _attach(chains: Mapping[str, list[Link]], ledger: Ledger) -> None:
    for links in chains.values():
        for link in links:
            link.problems = [c.message for c in ledger.breaks
                             if c.path in link.paths
                             or (c.stage is not None and c.stage == link.stage)]


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


def audit_revision(root: Path, name: str, params: Params | None) -> AuditReport:
    """The workspace (``params``: the params file the CLI read), or a git revision or DVC
    experiment resolved as compare resolves it, audited against its own params.yaml."""
    needed = [RAW_DIR, *(path(t) for path in (items_path, predictions_path, scores_path)
                         for t in TRACKS)]
    with RunReader(root) as reader:
        revision = reader.resolve(name)
        if revision.rev is None:
            # A fresh clone: name what is absent, and what brings it back, rather than audit
            # empty paths. (A missing judge table is the judge.recompute check's to report.)
            reader.require(revision, needed)
            return audit(root, params)
        # The checkout also holds the judge table reports/judge.json is recomputed from (zero
        # rows when the judge was off), where the revision's dvc.lock has one.
        with checked_out(reader, revision, [*needed, JUDGE_TABLE]) as tree:
            print(for_terminal(f"audit: {revision.kind} {revision.label} at "
                               f"{revision.rev[:12]}, checked out in a temporary worktree"),
                  file=sys.stderr)
            return audit(tree, load_params(tree / PARAMS_PATH))


def main(args: argparse.Namespace, params: Params | None) -> int:
    name = getattr(args, "name", None) or WORKSPACE
    if params is None and name == WORKSPACE:
        # The CLI lets audit start without a params file (a revision has its own): the
        # workspace does need one, with the usual error when it is not there.
        params = load_params(args.params)
    report = audit_revision(Path("."), name, params)
    if getattr(args, "json", False):
        print(json_for_terminal(json.dumps(report.to_json(), indent=2, sort_keys=True,
                                           ensure_ascii=False)))
    else:
        print(for_terminal(report.render()), end="")
    return 0 if report.ok else 1


__all__ = ["CHECKS", "AuditReport", "Check", "DvcHashes", "Ledger", "Link", "MetricResult",
           "audit", "audit_revision", "build_chains", "check_items", "check_lock", "check_metrics",
           "check_scores", "first_difference", "load_lock", "main", "recompute_metrics",
           "upstream_stages"]
