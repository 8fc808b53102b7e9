"""The offline page and the Vega-Lite template of `dvc plots` (the browser check that they draw
is tests/test_dvc_views.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rimo_eval.commands.plots_page import CSP, build, main
from rimo_eval.errors import DataError
from tests.support.paths import REPO_ROOT

MODULES = REPO_ROOT / "node_modules"


def test_page_inlines_the_pinned_packages_and_loads_nothing() -> None:
    assert (MODULES / "vega").is_dir(), "run `npm ci` (make setup) first"
    page = build(MODULES)
    lock = json.loads((REPO_ROOT / "package-lock.json").read_text(encoding="utf-8"))
    for name in ("vega", "vega-lite", "vega-embed"):
        entry = lock["packages"][f"node_modules/{name}"]
        assert entry["integrity"].startswith("sha512-")
        assert f"/* {name} {entry['version']} */" in page
        pinned = json.loads((REPO_ROOT / "package.json").read_text())["dependencies"][name]
        assert pinned == entry["version"]  # exact pins, no ranges
    # DVC fills {plot_divs}; with no {scripts} it adds no CDN script tag of its own.
    assert page.count("{plot_divs}") == 1 and "{scripts}" not in page
    assert "<script src" not in page and f'content="{CSP}"' in page
    assert build(MODULES) == page  # same packages, same bytes


def test_missing_packages_name_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"node_modules/vega/build/vega.min.js: not found: run "
                                        r"`npm ci`"):
        build(tmp_path / "node_modules")
    assert main(["--root", str(tmp_path)]) == 1
    assert not (tmp_path / ".dvc/plots/page.html").exists()


def test_dvc_yaml_plots_use_the_interval_template_with_category_x() -> None:
    spec = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    plots = {next(iter(p)): next(iter(p.values())) for p in spec["stages"]["score"]["plots"]}
    assert {k: (v["x"], v["y"], v["template"]) for k, v in plots.items()} == {
        "reports/plots/rimo_n_by_domain.csv": ("domain", "accuracy", "rimo_bars_ci"),
        "reports/plots/rimo_p_by_parts.csv": ("parts", "prefix_score", "rimo_bars_ci"),
        "reports/plots/rimo_n_by_year.csv": ("band", "accuracy", "rimo_bars_ci"),
        "reports/plots/rimo_p_by_year.csv": ("band", "strict", "rimo_bars_ci")}
    template = json.loads((REPO_ROOT / ".dvc/plots/rimo_bars_ci.json").read_text())
    assert template["encoding"]["x"] == {**template["encoding"]["x"], "type": "nominal",
                                         "field": "<DVC_METRIC_X>"}
    bar = template["layer"][0]["encoding"]["y"]
    assert bar["type"] == "quantitative" and bar["scale"]["domain"] == [0, 1]
    text = json.dumps(template)
    assert "<DVC_METRIC_Y>_ci_low" in text and "<DVC_METRIC_Y>_ci_high" in text
    config = (REPO_ROOT / ".dvc/config").read_text(encoding="utf-8")
    assert "html_template = plots/page.html" in config
