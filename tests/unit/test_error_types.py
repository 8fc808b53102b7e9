"""Failures carry their kind (ConfigError, DataError, IntegrityError), so callers can tell."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rimo_eval.errors import ConfigError, DataError, IntegrityError
from rimo_eval.fetch import fetch
from rimo_eval.params.chat import OpenAIParams
from rimo_eval.params.config import FetchParams
from rimo_eval.predict import collect, predict
from rimo_eval.predictors import Prediction, create_predictor
from rimo_eval.validate.stage import run as validate_run
from tests.support.factories import params, predict_section, section
from tests.support.paths import REPO_ROOT, UPSTREAM_FILES

ERRATA = REPO_ROOT / "data/errata.yaml"
PARAMS = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))


def test_config_problems_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'gpt-9' is not registered"):
        create_predictor("gpt-9")
    with pytest.raises(ConfigError, match=r"predict\.openai\.model must name"):
        create_predictor("openai", section(OpenAIParams, "predict.openai", {"model": None}))
    with pytest.raises(ConfigError, match=r"predict\.limit: Input should be a valid integer"):
        predict(predict_section(backend="oracle", limit=True), tmp_path / "items",
                tmp_path / "preds")
    bad = tmp_path / "errata.yaml"
    bad.write_text("version: 1\nerrata: [{id: X1}]\n")
    with pytest.raises(ConfigError, match="invalid errata file"):
        validate_run(params(validate={"errata": str(bad)}), raw_dir=tmp_path)


def test_bad_data_is_a_data_error(tmp_path: Path, raw_dir: Path) -> None:
    (raw_dir / "RIMO-N.jsonl").write_bytes(b"{not json\n")
    with pytest.raises(DataError, match=r"rule=json\.parse"):
        validate_run(params(validate={"errata": str(ERRATA)}), raw_dir=raw_dir,
                     items_dir=tmp_path / "items", report_path=tmp_path / "v.json")
    # A backend answering an item nobody asked for is bad data from the backend.
    with pytest.raises(DataError, match="not requested"):
        collect([Prediction("RIMO-N", "2001a1", "1")], [], "replay")


def test_a_pin_mismatch_is_an_integrity_error(tmp_path: Path, mirror_dir: Path) -> None:
    """The network copy (here: a local 'server' folder) differs from the pinned sha256."""
    served = tmp_path / "served"
    served.mkdir()
    for name in UPSTREAM_FILES:
        shutil.copyfile(mirror_dir / name, served / name)
    (served / "RIMO-N.csv").write_bytes(b"tampered\n")
    cfg = {**PARAMS["fetch"], "mirrors": [], "url_template": served.as_uri() + "/{file}"}
    with pytest.raises(IntegrityError, match=r"RIMO-N\.csv: sha256 mismatch"):
        fetch(section(FetchParams, "fetch", cfg), tmp_path / "raw")
    assert not (tmp_path / "raw").exists()
