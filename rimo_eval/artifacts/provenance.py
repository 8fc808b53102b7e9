"""The provenance block of ``reports/metrics.json``: where the numbers came from.

A metrics file gets copied into papers, chats and PRs without its repo; the block lets it still
say which inputs (sha256), upstream pin, predictor fingerprints, params, commit and package
versions produced it. Nothing time- or machine-dependent goes in, so equal inputs give a
byte-identical metrics file (and a second ``dvc repro`` stays a no-op).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rimo_eval.io.git import head_commit, is_dirty
from rimo_eval.io.hashing import fingerprint, sha256_file

if TYPE_CHECKING:
    from rimo_eval.params.config import FetchParams

PROVENANCE_VERSION = 1
# The packages whose behaviour decides the stored scores and metrics.
PACKAGES = ("rimo-eval", "dvc", "numpy", "pandas", "pyarrow")
# Tracked code whose uncommitted edits would make the commit an incomplete description. Not
# params.yaml: params are recorded on their own (dvc.lock, the params fingerprint), and every
# `dvc exp run -S` edits it, so counting it called every experiment's sources dirty.
SOURCE_PATHS = ("rimo_eval", "notebooks", "dvc.yaml", "pyproject.toml")


def display_path(path: str | os.PathLike[str], root: str | os.PathLike[str] = ".") -> str:
    """Repo-relative POSIX path when under ``root`` (stable across machines), else as given."""
    p = Path(path)
    try:
        return p.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def file_hashes(paths: Iterable[str | os.PathLike[str]], root: str | os.PathLike[str] = "."
                ) -> dict[str, str]:
    return {display_path(p, root): sha256_file(p) for p in paths}


def git_state(cwd: str | os.PathLike[str] = ".") -> dict[str, Any]:
    """HEAD and whether the pipeline's sources differ from it; nulls outside a git repo."""
    commit = head_commit(cwd)
    if commit is None:
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": is_dirty(cwd, SOURCE_PATHS)}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def upstream_pin(fetch_cfg: FetchParams | None) -> dict[str, Any] | None:
    """The content-defining part of ``fetch`` (not mirrors or URLs, which only say where from)."""
    if fetch_cfg is None:
        return None
    return {"repo": fetch_cfg.repo, "revision": fetch_cfg.revision, "folder": fetch_cfg.folder,
            "sha256": {k: v.lower() for k, v in fetch_cfg.sha256.items()}}


def _single(values: pd.Series) -> str | None:
    # One predictions file comes from one backend run; a mix is shown, not hidden.
    distinct = sorted({str(v) for v in values.dropna()})
    return "+".join(distinct) if distinct else None


def predictions_identity(frame: pd.DataFrame) -> dict[str, str | None]:
    return {"backend": _single(frame["backend"]), "fingerprint": _single(frame["fingerprint"])}


def params_fingerprint(upstream: Mapping[str, Any] | None,
                       predictions: Mapping[str, Mapping[str, Any]],
                       score_params: Mapping[str, Any]) -> str:
    """sha256 of the params that determine the metrics: the upstream pin, each track's predictor
    fingerprint (backend + its params + templates) and the score params. Unused params (another
    backend's section, mirror paths) stay out, so they cannot make the block look stale."""
    return fingerprint({
        "upstream": upstream,
        "predict": {t: v.get("fingerprint") for t, v in predictions.items()},
        "score": score_params,
    })


def build_provenance(*, inputs: Iterable[str | os.PathLike[str]],
                     outputs: Iterable[str | os.PathLike[str]],
                     predictions: Mapping[str, pd.DataFrame],
                     score_params: Mapping[str, Any],
                     fetch_cfg: FetchParams | None,
                     root: str | os.PathLike[str] = ".") -> dict[str, Any]:
    preds = {track: predictions_identity(df) for track, df in sorted(predictions.items())}
    upstream = upstream_pin(fetch_cfg)
    return {
        "version": PROVENANCE_VERSION,
        "inputs": file_hashes(inputs, root),
        "outputs": file_hashes(outputs, root),
        "predictions": preds,
        "upstream": upstream,
        "params": {"score": dict(score_params)},
        "params_fingerprint": params_fingerprint(upstream, preds, score_params),
        "git": git_state(root),
        "packages": package_versions(),
    }


__all__ = ["PACKAGES", "PROVENANCE_VERSION", "build_provenance", "display_path", "file_hashes",
           "git_state", "package_versions", "params_fingerprint", "predictions_identity",
           "upstream_pin"]
