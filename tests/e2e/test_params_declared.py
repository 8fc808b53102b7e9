"""dvc.yaml declares every param a stage reads: a param it does not declare cannot change it.

Derived from behaviour rather than a list kept by hand: for each stage, every params leaf that
its ``params:`` in dvc.yaml does not cover is changed to another valid value, the stage is rerun
with that file, and its outputs must be byte-identical. A stage that reads an undeclared key
(the report's notebook reading ``predict.*`` while dvc.yaml named only ``report``) changes its
output, or fails, and the test names the stage and the keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from rimo_eval.artifacts.paths import PREDICT_RUN_PATH
from rimo_eval.params.backends import BUILTIN_BACKENDS
from rimo_eval.params.config import parse_params
from rimo_eval.params.offline import REPLAY_FORMATS
from tests.support.params_declared import covered, declared, dvc_stages
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import BIN, make_repo, sh

STAGES = ("check-params", "fetch", "validate", "predict", "score", "judge", "view", "report")
# What another engineer's score change will read; declared ahead of it.
SCORE_WILL_READ = ("predict.limit", "predict.sample_seed")


def _changed(value: Any) -> Any:
    """Another value of the same type that validation still accepts."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2 + 0.25  # stays inside (0, 1) for a confidence level
    for choices in (REPLAY_FORMATS, BUILTIN_BACKENDS):  # a choice: the next one
        if isinstance(value, str) and value in choices:
            return choices[(choices.index(value) + 1) % len(choices)]
    if isinstance(value, str):
        # A sha256 pin must stay 64 hex digits; any other string just gets longer.
        return value[::-1] if len(value) == 64 else f"{value}-changed"
    if isinstance(value, list):
        # A list of ints (score.pass_at) stays one; a list of paths (fetch.mirrors) grows.
        if value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return [*value, value[-1] + 1]
        return [*value, "changed"]
    return value  # None or {}: the type is not known here, left as it is


def perturb(data: Any, keys: list[str], prefix: str = "") -> tuple[Any, list[str]]:
    """``data`` with every leaf not covered by ``keys`` changed, and the changed paths."""
    if isinstance(data, dict) and data:
        out, changed = {}, []
        for k, v in data.items():
            out[k], sub = perturb(v, keys, f"{prefix}{k}.")
            changed += sub
        return out, changed
    path = prefix.rstrip(".")
    if covered(path, keys):
        return data, []
    new = _changed(data)
    return new, [path] if new != data else []


def outs(stage: dict[str, Any]) -> list[str]:
    paths = []
    for kind in ("outs", "metrics", "plots"):
        for entry in stage.get(kind) or []:
            paths.append(entry if isinstance(entry, str) else next(iter(entry)))
    return paths


def snapshot(root: Path, paths: list[str]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for rel in paths:
        target = root / rel
        found = sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [
            target]
        files |= {p.relative_to(root).as_posix(): steady_bytes(root, p) for p in found}
    return files


def steady_bytes(root: Path, path: Path) -> bytes:
    """The file's bytes, less the run facts that differ between any two runs: predict's
    wall time (reports/predict_run.json is documented as not deterministic)."""
    if path.relative_to(root) != PREDICT_RUN_PATH:
        return path.read_bytes()
    facts = json.loads(path.read_text(encoding="utf-8"))
    facts.pop("wall_s")
    return json.dumps(facts, sort_keys=True).encode()


def test_score_declares_the_sample_params() -> None:
    keys = declared(dvc_stages()["score"])
    assert all(covered(k, keys) for k in SCORE_WILL_READ), keys


def test_perturbing_works_on_every_section() -> None:
    """The check below is only as good as its changes: every stage gets a valid file in which
    each undeclared, non-null leaf really differs."""
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    for name, stage in dvc_stages().items():
        data, changed = perturb(params, declared(stage))
        parse_params(data, f"perturbed for {name}")
        assert changed and not any(covered(c, declared(stage)) for c in changed)
    report_changed = perturb(params, declared(dvc_stages()["report"]))[1]
    assert "validate.errata" in report_changed and "fetch.mirrors" in report_changed


def test_undeclared_params_do_not_change_any_stage(tmp_path: Path, mirror_dir: Path) -> None:
    root = make_repo(tmp_path / "project", mirror_dir,
                     predict={"backend": "constant", "limit": 3})
    spec = dvc_stages(root)
    params_file = root / "params.yaml"
    # Uncommitted in the baseline too: provenance records whether params.yaml is dirty.
    original = params_file.read_text(encoding="utf-8") + "# baseline, not committed\n"
    params_file.write_text(original, encoding="utf-8")
    for name in STAGES:
        sh(root, str(BIN / "rimo-eval"), name)
    baseline = {name: snapshot(root, outs(spec[name])) for name in STAGES}
    params = yaml.safe_load(original)
    problems = []
    for name in STAGES:
        data, changed = perturb(params, declared(spec[name]))
        # Same path as the baseline: the report shows the params file's path.
        params_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        try:
            proc = sh(root, str(BIN / "rimo-eval"), name, check=False)
        finally:
            params_file.write_text(original, encoding="utf-8")
        if proc.returncode != 0:
            problems.append(f"{name}: failed with undeclared params changed {changed}:\n"
                            f"{proc.stderr[-1500:]}")
            continue
        after = snapshot(root, outs(spec[name]))
        differ = sorted(p for p in baseline[name].keys() | after.keys()
                        if baseline[name].get(p) != after.get(p))
        if differ:
            problems.append(f"{name}: {differ} changed with undeclared params {changed}")
    assert not problems, "dvc.yaml misses params a stage reads:\n" + "\n".join(problems)
