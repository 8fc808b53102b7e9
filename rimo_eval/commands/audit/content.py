"""The content chain, step by step: upstream pin -> items -> predictions -> scores.

Each file is checked against the step before it with the stages' own code (content hashes,
the predictor's fingerprint, the score stage's grading), not against a copy of their rules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rimo_eval.artifacts.paths import RAW_DIR
from rimo_eval.artifacts.predictions import light_columns
from rimo_eval.artifacts.provenance import predictions_identity
from rimo_eval.commands.audit.ledger import MISSING, Ledger, ids
from rimo_eval.errors import StageError
from rimo_eval.io.hashing import fingerprint, sha256_file
from rimo_eval.params.config import PredictParams
from rimo_eval.rimo.tracks import TRACK_N
from rimo_eval.score.stage import SCORE_SCHEMAS, join_predictions, score_n, score_p


def check_upstream(ledger: Ledger, root: Path, pin: Mapping[str, Any] | None
                   ) -> dict[str, str | None]:
    """The fetched files against the sha256 pinned in params (what makes items 'the benchmark')."""
    hashes: dict[str, str | None] = {}
    if not pin or not pin.get("sha256"):
        ledger.broke("upstream.sha256", "params.yaml", "params.yaml: no fetch.sha256 pins to "
                     "check the upstream files against")
        return hashes
    for name, want in pin["sha256"].items():
        path = (RAW_DIR / name).as_posix()
        if not (root / path).is_file():
            ledger.broke("upstream.sha256", path, f"{path}: missing (run `dvc repro`)")
            hashes[name] = None
            continue
        got = hashes[name] = sha256_file(root / path)
        ledger.verdict(got == want, "upstream.sha256", path,
                       f"{path}: sha256 matches the pin in params.yaml",
                       f"{path}: sha256 {got} differs from the pin in params.yaml "
                       f"fetch.sha256 ({want})")
    return hashes


def check_items(ledger: Ledger, path: Path, shown: str) -> pd.DataFrame | None:
    """Every item row against its own content_hash (the hash predictions are tied to)."""
    if not path.is_file():
        ledger.broke("items.content_hash", shown, f"{shown}: missing (run `dvc repro`)")
        return None
    rows = pq.read_table(path).to_pylist()
    bad = [r["problem_id"] for r in rows
           if fingerprint({k: v for k, v in r.items() if k != "content_hash"})
           != r["content_hash"]]
    ledger.verdict(not bad, "items.content_hash", shown,
                   f"{shown}: {len(rows)} content hashes recompute",
                   f"{shown}: {len(bad)} rows do not match their content_hash (edited items): "
                   f"{ids(bad)}")
    return pd.read_parquet(path)


def expected_fingerprint(root: Path, backend: str, params: PredictParams) -> str:
    """What ``backend``, configured by params ``predict`` now, fingerprints to: the predict
    stage's own identity (params, templates, replay file hashes, model hash...). Paths in the
    params are relative to the repo, so it is computed there. The predictor is built as the
    stage builds it, ``predict.samples`` included (k > 1 is part of the identity)."""
    from rimo_eval.predictors.registry import build_predictor

    with contextlib.chdir(root):
        return fingerprint(build_predictor(params, backend).identity())


def check_fingerprint(ledger: Ledger, root: Path, preds: pd.DataFrame, shown: str,
                      predict_cfg: PredictParams | None) -> None:
    ident = predictions_identity(preds)
    backend, fp = ident["backend"], ident["fingerprint"]
    if not backend or not fp or "+" in backend or "+" in fp:
        return  # no single identity to recompute: predictions.one_run says so
    if predict_cfg is None:
        ledger.broke("predictions.fingerprint", shown, f"{shown}: params have no predict "
                     f"section to recompute the fingerprint from")
        return
    try:
        want = expected_fingerprint(root, backend, predict_cfg)
    except StageError as exc:
        ledger.broke("predictions.fingerprint", shown, f"{shown}: cannot recompute the "
                     f"{backend} fingerprint from params predict: {exc}")
        return
    ledger.verdict(
        fp == want, "predictions.fingerprint", shown,
        f"{shown}: fingerprint {fp[:12]} recomputes from backend {backend} and params predict",
        f"{shown}: fingerprint {fp[:12]} (backend {backend}) does not recompute from params "
        f"predict and the backend's inputs now ({want[:12]}): predictions made with other "
        f"settings or files, or edited; rerun the predict stage")


def check_predictions(ledger: Ledger, root: Path, track: str, items: pd.DataFrame | None,
                      path: Path, shown: str, lock_backend: Any,
                      predict_cfg: PredictParams | None) -> pd.DataFrame | None:
    if not path.is_file():
        ledger.broke("predictions.items", shown, f"{shown}: missing (run `dvc repro`)")
        return None
    preds = pd.read_parquet(path, columns=light_columns(path))  # no reasoning texts
    ident = predictions_identity(preds)
    ledger.verdict(not any("+" in (v or "") for v in ident.values()), "predictions.one_run",
                   shown, f"{shown}: one backend and fingerprint",
                   f"{shown}: rows from several backends or fingerprints ({ident}); one "
                   f"predict run writes one")
    if lock_backend is not MISSING:
        ledger.verdict(ident["backend"] in (None, lock_backend), "predictions.backend", shown,
                       f"{shown}: backend {ident['backend']} is dvc.lock's predict.backend",
                       f"{shown}: made by backend {ident['backend']!r}, but dvc.lock says "
                       f"predict.backend {lock_backend!r}")
    check_fingerprint(ledger, root, preds, shown, predict_cfg)
    if items is not None:
        try:
            join_predictions(items, preds, track)
        except StageError as exc:
            ledger.broke("predictions.items", shown, f"{shown}: does not fit the items: {exc}")
        else:
            ledger.ok("predictions.items", shown, f"{shown}: item hashes match the items")
    return preds


def _table_rows(df: pd.DataFrame, track: str) -> dict[str, dict[str, Any]]:
    table = pa.Table.from_pandas(df, schema=SCORE_SCHEMAS[track], preserve_index=False)
    return {row_key(r): r for r in table.to_pylist()}


def row_key(row: Mapping[str, Any]) -> str:
    """A score row's id: the problem_id, with its sample when k > 1 (``2001a1#3``)."""
    j = row.get("sample") or 0
    return str(row["problem_id"]) + (f"#{j}" if j else "")


def check_scores(ledger: Ledger, track: str, items: pd.DataFrame | None,
                 preds: pd.DataFrame | None, path: Path, shown: str, sources: str
                 ) -> pd.DataFrame | None:
    """The scores file against a fresh grading of the predictions on disk."""
    if not path.is_file():
        ledger.broke("scores.recompute", shown, f"{shown}: missing (run `dvc repro`)")
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
        have = {row_key(r): r for r in pq.read_table(path).to_pylist()}
    except (pa.ArrowInvalid, KeyError) as exc:
        ledger.broke("scores.recompute", shown, f"{shown}: unreadable as a scores table ({exc})")
        return scores
    differ = sorted(pid for pid in want.keys() | have.keys() if want.get(pid) != have.get(pid))
    cols = sorted({c for pid in differ if pid in want and pid in have
                   for c in want[pid] if want[pid][c] != have[pid].get(c)})
    ledger.verdict(not differ, "scores.recompute", shown, f"{shown}: recomputes from {sources}",
                   f"{shown}: does not recompute from {sources}: {len(differ)} rows differ "
                   f"({ids(differ)})" + (f" in {', '.join(cols)}" if cols else ""))
    return scores


__all__ = ["check_fingerprint", "check_items", "check_predictions", "check_scores",
           "check_upstream", "expected_fingerprint"]
