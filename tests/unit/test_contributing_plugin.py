"""CONTRIBUTING.md's worked plugin backend runs as written: its module and its entry-point
table are taken from the file, registered as a distribution on sys.path (a .dist-info folder,
nothing pip-installed) and run by the real predict stage on the real items."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from rimo_eval.artifacts.paths import predictions_path
from rimo_eval.errors import ConfigError
from rimo_eval.predict import predict
from rimo_eval.predictors.registry import predictor_class
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.validate import stage as validate
from tests.support.factories import params, predict_section

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "CONTRIBUTING.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", GUIDE.read_text(encoding="utf-8"),
                      re.MULTILINE | re.DOTALL)


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The guide's package, installed the way pip leaves it: module + dist-info metadata."""
    (module_code,) = _blocks("python")
    (table,) = _blocks("toml")
    group = tomllib.loads(table)["project"]["entry-points"]["rimo_eval.predictors"]
    (name, target), = group.items()
    package = tmp_path / "site" / "my_package"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "predictor.py").write_text(module_code)
    dist = tmp_path / "site" / "my_package-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-package\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[rimo_eval.predictors]\n{name} = {target}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return str(name)


@pytest.fixture(scope="module")
def items(tmp_path_factory: pytest.TempPathFactory, mirror_dir: Path) -> Path:
    """The real items, validated once for the module."""
    tmp = tmp_path_factory.mktemp("items")
    validate.run(params(validate={"errata": str(ROOT / "data/errata.yaml")}), raw_dir=mirror_dir,
                 items_dir=tmp / "items", report_path=tmp / "validation.json")
    return tmp / "items"


def test_the_guide_plugin_predicts_through_the_real_stage(plugin: str, items: Path,
                                                         tmp_path: Path) -> None:
    assert plugin == "guess"
    assert predictor_class(plugin).__module__ == "my_package.predictor"
    out = tmp_path / "preds"
    # The plugin's own section is admitted by the params validation, and k reaches it.
    predict(predict_section({"backend": plugin, "limit": 3, "samples": 2,
                             plugin: {"answer": "1"}}), items, out)
    n = pd.read_parquet(predictions_path(TRACK_N, out))
    p = pd.read_parquet(predictions_path(TRACK_P, out))
    assert len(n) == 3 * 2 and set(n["prediction"]) == {"1"}
    assert set(n["backend"]) == {"guess"} and set(n["sample"]) == {0, 1}
    assert len(p) == 3 * 2
    assert all(set(parts) == {""} and len(parts) >= 1 for parts in p["prediction"])


def test_the_guide_plugin_checks_its_section(plugin: str, items: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"predict\.guess\.answer must be a string, got 1"):
        predict(predict_section({"backend": plugin, "limit": 1, plugin: {"answer": 1}}), items,
                tmp_path / "p")


def test_a_misspelt_plugin_section_is_refused(plugin: str, items: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"gues"):
        predict(predict_section(backend=plugin, limit=1, gues={"answer": "1"}), items,
                tmp_path / "p")
