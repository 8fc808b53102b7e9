"""params.yaml is validated once, into typed sections, and ``--params`` reaches every stage."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from rimo_eval.errors import ConfigError
from rimo_eval.params.config import Params, load_params, parse_params
from rimo_eval.params.section import PluginSection
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import BIN, make_repo, sh

PARAMS = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))


def refused(change: Any) -> str:
    data = copy.deepcopy(PARAMS)
    change(data)
    with pytest.raises(ConfigError) as err:
        parse_params(data, "exp.yaml")
    return str(err.value)


def test_the_project_params_load_into_typed_sections() -> None:
    params = load_params(REPO_ROOT / "params.yaml")
    assert isinstance(params, Params)
    assert params.predict.backend == PARAMS["predict"]["backend"]
    assert params.validate_.errata == PARAMS["validate"]["errata"]
    # The dict view is the file as written: backends fingerprint it, so it must not drift.
    assert params.as_dict() == PARAMS
    assert params.predict.backend_config("openai").as_dict() == PARAMS["predict"]["openai"]
    assert params.predict.backend_config("oracle") is None  # no section: the backend's defaults


@pytest.mark.parametrize(("change", "message"), [
    (lambda p: p["predict"]["openai"].update(temprature=0.5),
     "exp.yaml: predict.openai.temprature: unknown key"),
    (lambda p: p.update(sccore={}), "exp.yaml: sccore: unknown key"),
    (lambda p: p.update(path="elsewhere.yaml"), "exp.yaml: path: unknown key"),
    (lambda p: p.pop("score"), "exp.yaml: score: missing key"),
    (lambda p: p["fetch"].pop("revision"), "exp.yaml: fetch.revision: missing key"),
    (lambda p: p["predict"].update(lokal={}), "exp.yaml: predict.lokal: unknown key"),
    (lambda p: p["predict"].update(limit=True),
     "exp.yaml: predict.limit: Input should be a valid integer (got True)"),
    (lambda p: p["predict"].update(limit=-1), "exp.yaml: predict.limit: Input should be greater"),
    (lambda p: p["predict"].update(limit="5"), "exp.yaml: predict.limit: Input should be a valid"),
    (lambda p: p["score"]["bootstrap"].update(samples=1.5), "exp.yaml: score.bootstrap.samples:"),
    (lambda p: p["fetch"]["mirrors"].append(3), "exp.yaml: fetch.mirrors.1: Input should be"),
    (lambda p: p["report"].update(worst_failures=False), "exp.yaml: report.worst_failures:"),
    (lambda p: p["fetch"]["sha256"].update({"RIMO-N.csv": "abc"}),
     "exp.yaml: fetch.sha256.RIMO-N.csv: String should match pattern"),
])
def test_bad_params_name_the_key_path(change: Any, message: str) -> None:
    assert message in refused(change)


def test_every_problem_is_reported_at_once() -> None:
    def two(p: dict[str, Any]) -> None:
        p["predict"]["limit"] = True
        p["report"]["worst"] = 1

    lines = refused(two).splitlines()
    assert lines == ["exp.yaml: predict.limit: Input should be a valid integer (got True)",
                     "exp.yaml: report.worst: unknown key"]


def test_a_plugin_backend_may_have_its_own_section(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a backend registered in the entry-point group gets an unchecked section."""
    def plugin(p: dict[str, Any]) -> None:
        p["predict"].update(backend="echo", echo={"anything": [1, 2]})

    assert "exp.yaml: predict.echo: unknown key" in refused(plugin)
    dist = tmp_path / "rimo_echo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rimo-echo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[rimo_eval.predictors]\necho = rimo_echo:Echo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = copy.deepcopy(PARAMS)
    plugin(data)
    params = parse_params(data, "exp.yaml")
    section = params.predict.backend_config()
    assert isinstance(section, PluginSection) and section.as_dict() == {"anything": [1, 2]}
    data["predict"]["echo"] = "not a mapping"
    with pytest.raises(ConfigError, match=r"predict\.echo: a backend section must be a mapping"):
        parse_params(data, "exp.yaml")
    data["predict"]["echo"] = {1: "a number as a key"}
    with pytest.raises(ConfigError, match=r"predict\.echo: a backend section's keys must be "
                                          "strings"):
        parse_params(data, "exp.yaml")


def test_cli_refuses_bad_params_without_traceback(tmp_path: Path) -> None:
    data = copy.deepcopy(PARAMS)
    data["predict"]["openai"]["temprature"] = 0.5
    path = tmp_path / "elsewhere.yaml"
    path.write_text(yaml.safe_dump(data))
    proc = sh(tmp_path, str(BIN / "rimo-eval"), "--params", str(path), "predict", check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"{path}: predict.openai.temprature: unknown key" in proc.stderr


def test_every_stage_uses_the_params_file_it_is_given(tmp_path: Path, mirror_dir: Path) -> None:
    """No params.yaml in the project at all: every stage, the notebook included, reads the
    --params file, and its values (errata path, backend, limit, bootstrap) are the ones used."""
    root = make_repo(tmp_path / "project", mirror_dir)
    other = tmp_path / "experiments"
    other.mkdir()
    data = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").unlink()
    shutil.move(root / "data/errata.yaml", other / "errata.yaml")
    data["validate"]["errata"] = str(other / "errata.yaml")
    data["predict"].update(backend="constant", limit=3, sample_seed=7)
    data["predict"]["constant"] = {"answer": "42", "solution": "forty-two"}
    data["score"]["bootstrap"]["samples"] = 57
    data["report"]["worst_failures"] = 2
    params = other / "exp.yaml"
    params.write_text(yaml.safe_dump(data, sort_keys=False))
    for stage in ("fetch", "validate", "predict", "score", "judge", "report"):
        sh(root, str(BIN / "rimo-eval"), "--params", str(params), stage)

    preds = pd.read_parquet(root / "data/predictions/rimo_n.parquet")
    assert len(preds) == 3 and set(preds["prediction"]) == {"42"}
    assert len(pd.read_parquet(root / "data/predictions/rimo_p.parquet")) == 3
    metrics = json.loads((root / "reports/metrics.json").read_text())
    assert metrics["sample"]["evaluated"] == {TRACK_N: 3, TRACK_P: 3}
    provenance = json.loads((root / "reports/provenance.json").read_text())
    assert provenance["params"]["score"]["bootstrap"]["samples"] == 57
    nb = json.loads((root / "reports/report.ipynb").read_text())
    injected = next("".join(c["source"]) for c in nb["cells"]
                    if "injected-parameters" in c.get("metadata", {}).get("tags", []))
    assert f'params_path = "{params.as_posix()}"' in injected
    assert "worst_failures = 2" in injected
