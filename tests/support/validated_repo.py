"""A fresh project repo that has run ``dvc repro validate``, as a copy of one built once per run.

Most end-to-end fixtures start the same way: ``make_repo`` (the project, its predict section
set), then ``dvc repro validate`` (check-params, fetch, validate over the real 791 items), then
their own runs. fetch and validate read no predict key, so that start is the same for every
predict section: conftest's ``validated_base`` builds it once, and ``validated_copy`` gives a
test a private copy with its own predict section, committed as ``make_repo`` commits it. The next
``dvc repro`` reruns only check-params (params.yaml changed; its stamp is the same bytes for
every valid file) before the stages the test runs; fetch and validate stay up to date.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import copy_repo, make_repo, merged, sh


def build_validated(repo: Path, mirror: Path) -> Path:
    """``make_repo`` with the default predict section, then ``dvc repro validate``."""
    make_repo(repo, mirror)
    sh(repo, "dvc", "repro", "validate")
    return repo


def validated_copy(base: Path, dest: Path, predict: dict[str, Any] | None = None) -> Path:
    """What ``make_repo(dest, mirror, predict)`` and then ``dvc repro validate`` leave: the
    project in one git commit (its params.yaml's predict section as ``make_repo`` writes it),
    the validated items and dvc.lock in the workspace, uncommitted."""
    repo = copy_repo(base, dest)
    params_path = repo / "params.yaml"
    params = yaml.safe_load(params_path.read_text(encoding="utf-8"))
    project = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["predict"] = merged(project["predict"],
                               predict or {"backend": "oracle", "limit": None})
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    sh(repo, "git", "commit", "-q", "--amend", "--no-edit", "--", "params.yaml")
    return repo
