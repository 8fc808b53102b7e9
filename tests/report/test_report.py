"""The report stage: a real papermill/ipykernel execution of notebooks/report.ipynb.

One render is shared by the module (a kernel start costs seconds); the other renders are the
rerun for determinism, the full-run (no banner) case and a notebook that fails.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
import yaml

from rimo_eval.errors import StageError
from rimo_eval.io.hashing import sha256_file
from rimo_eval.params.config import load_params
from rimo_eval.report import charts as C
from rimo_eval.report import html as H
from rimo_eval.report import runner
from rimo_eval.report import stage as R
from rimo_eval.report import tables as T
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import params
from tests.support.paths import REPO_ROOT
from tests.support.report_fixtures import FINDING_MESSAGE, XSS_TEXT, make_report_inputs


def _project(root: Path, *, sample: bool = True) -> dict[str, Path]:
    """A project root with the report inputs and the real notebook at its usual place."""
    paths = make_report_inputs(root, sample=sample)
    (root / "notebooks").mkdir(exist_ok=True)
    shutil.copyfile(REPO_ROOT / R.NOTEBOOK, root / R.NOTEBOOK)
    return paths


def _run_stage(root: Path) -> None:
    with contextlib.chdir(root):  # the stage, like DVC, runs from the project root
        R.run(load_params())


def _banner(html_text: str) -> str:
    start = html_text.index('<div class="rimo-banner">')
    return html_text[start:html_text.index("</div>", start)]


class _Alignments(HTMLParser):
    """Per table: each column's header and the text-align of its header and every cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[dict[str, set[str]]] = []
        self._heads: list[str] = []
        self._aligns: list[str] = []
        self._col = -1
        self._in_th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        style = dict(attrs).get("style") or ""
        first = style.split(";")[0]  # text-align first; white-space: nowrap may follow
        align = first.removeprefix("text-align: ") if first.startswith("text-align") else "?"
        if tag == "table":
            self.tables.append({})
            self._heads, self._aligns = [], []
        elif tag == "th":
            self._in_th = True
            self._heads.append("")
            self._aligns.append(align)
        elif tag == "tr":
            self._col = -1
        elif tag == "td":
            self._col += 1
            self.tables[-1].setdefault(self._heads[self._col], set()).add(align)

    def handle_endtag(self, tag: str) -> None:
        if tag == "th":
            self._in_th = False
        elif tag == "thead":
            for head, align in zip(self._heads, self._aligns, strict=True):
                self.tables[-1][head] = {align}

    def handle_data(self, data: str) -> None:
        if self._in_th:
            self._heads[-1] += data


def alignments(html_text: str) -> list[dict[str, set[str]]]:
    parser = _Alignments()
    parser.feed(html_text)
    return parser.tables


class _Elements(HTMLParser):
    """Every element with its attributes, the text of script elements, and the visible text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._open.append(tag)
            if tag == "script":
                self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if not self._open:
            self.text.append(data)
        elif self._open[-1] == "script":
            self.scripts[-1] += data


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("report")
    paths = _project(root)
    _run_stage(root)
    html_text = (root / R.OUT_HTML).read_text(encoding="utf-8")
    parser = _Elements()
    parser.feed(html_text)
    return {"root": root, "paths": paths, "html": html_text, "parser": parser,
            "ipynb": (root / R.OUT_IPYNB).read_bytes(),
            "html_bytes": (root / R.OUT_HTML).read_bytes()}


# --- the rendered report -------------------------------------------------------------------------

def test_html_has_headline_numbers(rendered: dict) -> None:
    metrics = json.loads(rendered["paths"]["metrics_path"].read_text(encoding="utf-8"))
    n, p = metrics[TRACK_N], metrics[TRACK_P]
    expected = [f"{n['accuracy']:.1%}", f"{p['strict']:.1%}", f"{p['sub_problem_accuracy']:.1%}",
                f"{p['prefix_score']:.1%}"]
    # metrics.json's flat interval keys, beside their metric.
    expected.append(f"[{n['accuracy_ci_low']:.1%}, {n['accuracy_ci_high']:.1%}]")
    expected.append(f"[{p['prefix_score_ci_low']:.1%}, {p['prefix_score_ci_high']:.1%}]")
    for value in expected:
        assert value in rendered["html"], value
    assert "62.5%" in rendered["html"]  # 5/8 lenient, as a cross-check of the formatting


def test_model_text_is_escaped_not_markup(rendered: dict) -> None:
    html_text, parser = rendered["html"], rendered["parser"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in html_text
    assert "<script>alert" not in html_text and "<img src=x" not in html_text
    # No element anywhere carries the injected attributes, and no script (nbconvert's own
    # MathJax/require ones included) contains the injected code.
    for tag, attrs in parser.elements:
        assert "onerror" not in attrs, (tag, attrs)
        assert not (tag == "img" and attrs.get("src") == "x"), attrs
    assert not any("alert(" in script for script in parser.scripts)
    # It is shown as text, verbatim: markdown is not interpreted either.
    visible = "".join(parser.text)
    assert XSS_TEXT in visible
    assert "<strong>bold" not in html_text
    assert FINDING_MESSAGE in visible and "a&lt;b&gt;c" in html_text


def test_charts_are_embedded_pngs_without_software_tag(rendered: dict) -> None:
    sources = [a.get("src") or "" for tag, a in rendered["parser"].elements if tag == "img"]
    pngs = [s for s in sources if s.startswith("data:image/png;base64,")]
    assert len(pngs) == 4  # headline, domains, parts, competition years
    for src in pngs:
        data = base64.b64decode(src.split(",", 1)[1])
        assert data.startswith(b"\x89PNG") and b"Software" not in data


def test_provenance_lists_hashes_backend_and_params(rendered: dict) -> None:
    html_text, paths = rendered["html"], rendered["paths"]
    for name in ("items_n_path", "items_p_path", "predictions_n_path", "predictions_p_path",
                 "scores_n_path", "scores_p_path"):
        assert sha256_file(paths[name]) in html_text, name
    params = load_params(paths["params_path"]).as_dict()
    assert params["fetch"]["revision"] in html_text
    for digest in params["fetch"]["sha256"].values():
        assert digest in html_text
    assert "replay" in html_text and "predict.limit" in html_text
    assert "score.bootstrap.samples" in html_text
    assert "git commit" in html_text and "unknown" in html_text  # tmp root: not a repository
    assert "validated input sha256" in html_text and "e" * 64 in html_text  # errata file
    assert "packages.pyarrow" in html_text and "p" * 64 in html_text  # score's own record


def test_sample_banner_shown_for_sample(rendered: dict) -> None:
    assert 'class="rimo-banner"' in rendered["html"]
    assert "8 of 335 RIMO-N and 5 of 456 RIMO-P" in rendered["html"]


def test_code_is_hidden_and_sections_present(rendered: dict) -> None:
    html_text = rendered["html"]
    for text in ("Errata applied", "E001", "stored text", "text.control_char",
                 "Findings by rule", "Provenance", "Cost and budget", "not priced"):
        assert text in html_text, text
    assert "read_parquet" not in html_text and "H.table(" not in html_text
    assert "hl-ipython3" not in html_text  # no highlighted code blocks
    for text in ("This report shows one run", "Diagnostics (not the benchmark",
                 "Strict vs lenient", "Items where exact and lenient match differ",
                 "Wrong answers the flags explain", "lowest prefix scores, part by part"):
        assert text in html_text, text
    assert "Worst failures" not in html_text


def test_judge_section_is_labelled_and_escaped(rendered: dict) -> None:
    from rimo_eval.report.judge import SECTION
    from tests.support.report_fixtures import JUDGE_REASON_XSS

    html_text = rendered["html"]
    # The notebook's markdown heading (nbconvert adds an id and an anchor link to it).
    assert re.search(rf"<h2[^>]*>{re.escape(SECTION)}", html.unescape(html_text))
    for value in ("judge-model", "43.8%", "[25.0%, 68.8%]", "93.8%", "6.2%", "75.0%"):
        assert value in html_text, value
    assert html.escape(JUDGE_REASON_XSS) in html_text
    assert "<script>alert(3)" not in html_text
    assert "judge_calibration.json" in html_text  # the provenance table lists the judge files


def test_no_volatile_metadata(rendered: dict) -> None:
    text = rendered["ipynb"].decode("utf-8")
    for key in ("start_time", "end_time", "duration", "iopub.", "shell.execute_reply",
                "input_path", "output_path", "environment_variables"):
        assert key not in text, key
    nb = nbformat.reads(text, as_version=4)
    assert "version" not in nb.metadata.papermill
    assert nb.metadata.papermill.parameters["worst_failures"] == 10
    assert [c.id for c in nb.cells].count("injected-parameters") == 1
    # Relative paths only: the report does not depend on where the project lives.
    root = str(rendered["root"])
    assert root not in text and root not in rendered["html"]


def test_rerun_is_byte_identical(rendered: dict) -> None:
    root = rendered["root"]
    _run_stage(root)
    assert (root / R.OUT_IPYNB).read_bytes() == rendered["ipynb"]
    assert (root / R.OUT_HTML).read_bytes() == rendered["html_bytes"]
    assert sorted(p.name for p in (root / "reports").iterdir()) == [
        "breakdown.json", "judge.json", "judge_calibration.json", "metrics.json",
        "provenance.json", "report.html", "report.ipynb",
        "validation.json"]


def test_full_run_has_no_banner(tmp_path: Path) -> None:
    paths = make_report_inputs(tmp_path, sample=False)
    out_ipynb, out_html = tmp_path / "out/report.ipynb", tmp_path / "out/report.html"
    runner.render_report(REPO_ROOT / R.NOTEBOOK, out_ipynb, out_html,
                    {**paths, "worst_failures": 1})  # Path values are accepted
    html_text = out_html.read_text(encoding="utf-8")
    assert 'class="rimo-banner"' not in html_text and "SAMPLE RUN" not in html_text
    assert "50.0%" in html_text and out_ipynb.is_file()
    # worst_failures=1: one RIMO-P item (the lowest prefix score) and one flagged answer.
    assert "Part 1 of 2022c5" in html_text and "Part 1 of 2022n3" not in html_text
    assert "(1 of 2, each flag in turn)" in html_text


def test_text_columns_left_numbers_right_in_report(rendered: dict) -> None:
    tables = alignments(rendered["html"])
    fail_n = next(t for t in tables if "flags" in t and "model text" in t)
    fail_p = next(t for t in tables if "reference sub-solution" in t)
    for table, text in ((fail_n, ["problem_id", "flags", "problem", "prediction",
                                  "model text"]),
                        (fail_p, ["problem_id", "sub-problem", "reference sub-solution",
                                  "model's text"])):
        for column in text:
            assert table[column] == {"left"}, (column, table[column])
    assert fail_n["gold"] == {"right"} and fail_n["sample"] == {"right"}
    parts = next(t for t in tables if "Prefix score" in t)
    assert parts["Prefix score"] == {"right"} and parts["Parts"] == {"right"}
    prov = next(t for t in tables if set(t) == {"section", "item", "value"})
    assert prov["value"] == {"left"}  # hashes and paths are text
    headline = next(t for t in tables if "95% interval" in t)
    assert headline["Metric"] == {"left"} and headline["Value"] == {"right"}


def test_banner_follows_the_run_not_params_yaml(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    _run_stage(tmp_path)
    before = _banner((tmp_path / R.OUT_HTML).read_text(encoding="utf-8"))
    assert "predict.limit = 7, predict.sample_seed = 0" in before
    params = load_params(paths["params_path"]).as_dict()
    params["predict"].update(limit=None, sample_seed=9)  # edited after the run
    paths["params_path"].write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    _run_stage(tmp_path)
    after = (tmp_path / R.OUT_HTML).read_text(encoding="utf-8")
    assert _banner(after) == before
    # The rerun did read the edited params.yaml: its provenance table shows the new seed.
    seed_row = 'predict.sample_seed</td><td class="rimo-left" style="text-align: left">'
    assert f"{seed_row}9</td>" in after and f"{seed_row}0</td>" not in after
    # The banner does follow the run's files, which the score stage writes for each run.
    metrics = T.read_metrics(paths["metrics_path"], paths["breakdown_path"],
                             paths["provenance_path"])
    metrics["sample"]["limit"] = 3
    assert "predict.limit = 3," in H.sample_banner(metrics)


# --- failures leave nothing behind ---------------------------------------------------------------

def test_missing_input_names_file_and_writes_nothing(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    paths["scores_p_path"].unlink()
    with pytest.raises(StageError, match=r"data/scores/rimo_p\.parquet.*score stage"):
        _run_stage(tmp_path)
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [
        "breakdown.json", "judge.json", "judge_calibration.json", "metrics.json",
        "provenance.json", "validation.json"]


def test_failing_notebook_raises_stage_error_and_keeps_old_report(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    paths["metrics_path"].write_text(json.dumps({TRACK_N: "not a mapping"}), encoding="utf-8")
    old = tmp_path / R.OUT_HTML
    old.write_text("previous report", encoding="utf-8")
    with pytest.raises(StageError, match="AttributeError"):
        _run_stage(tmp_path)
    assert old.read_text(encoding="utf-8") == "previous report"
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [
        "breakdown.json", "judge.json", "judge_calibration.json", "metrics.json",
        "provenance.json", "report.html", "validation.json"]


def test_unknown_parameter_rejected_before_execution(tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"unknown parameter.*worst_failure\b"):
        runner.render_report(REPO_ROOT / R.NOTEBOOK, tmp_path / "a.ipynb", tmp_path / "a.html",
                        {"worst_failure": 3})
    assert not list(tmp_path.iterdir())


def test_missing_notebook(tmp_path: Path) -> None:
    with pytest.raises(StageError, match=r"nope\.ipynb: report notebook not found"):
        runner.render_report(tmp_path / "nope.ipynb", tmp_path / "a.ipynb", tmp_path / "a.html", {})
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("value", [-1, "10", True, 2.5])
def test_invalid_worst_failures(value: object) -> None:
    # The stage takes the validated params: a bad value stops at validation, naming the key.
    with pytest.raises(StageError, match=r"report\.worst_failures"):
        R.run(params(report={"worst_failures": value}))


def test_missing_report_section() -> None:
    with pytest.raises(StageError, match=r"params\.yaml: report: missing key"):
        R.run(params(report=None))


# --- helpers, without a kernel -------------------------------------------------------------------

def test_html_table_escapes_headers_and_cells() -> None:
    import pandas as pd

    table = H.table(pd.DataFrame({"<h>": ["<b>x</b>", None], "t": ["a\nb", 0.5]}),
                         pre=["t"])
    assert "&lt;h&gt;" in table and "&lt;b&gt;x&lt;/b&gt;" in table and "<b>" not in table
    assert "<pre>a\nb</pre>" in table and "0.500" in table
    assert H.table(pd.DataFrame(columns=["a"]), empty="nothing") == "<p><em>nothing</em></p>"


def test_table_alignment_and_template_escaping() -> None:
    import pandas as pd

    frame = pd.DataFrame({"id": ["a1", "b2"], "n": [1, None], "rate": ["57.1%", "—"],
                          "answer": ["12", "7"], "<x>": ["<b>", "c"]})
    html_text = H.table(frame, pre=["answer"], title="<t>")
    (table,) = alignments(html_text)
    assert table == {"id": {"left"}, "n": {"right"}, "rate": {"right"}, "answer": {"left"},
                     "<x>": {"left"}}
    assert "<h3>&lt;t&gt;</h3>" in html_text and "<b>" not in html_text
    assert H.align([True, False]) == "left" and H.align(["—", None]) == "left"
    assert isinstance(html_text, str) and html_text._repr_html_() == html_text
    assert repr(html_text) == "<HTML>"  # the notebook's plain-text output stays stable


def test_templates_ship_with_the_package() -> None:
    import fnmatch
    import tomllib

    patterns = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text("utf-8"))["tool"][
        "setuptools"]["package-data"]["rimo_eval"]
    templates = sorted((REPO_ROOT / "rimo_eval/report/templates").iterdir())
    assert templates
    for path in templates:
        rel = path.relative_to(REPO_ROOT / "rimo_eval").as_posix()
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


def test_charts_are_figures_with_stable_pngs(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    paths = make_report_inputs(tmp_path)
    metrics = T.read_metrics(paths["metrics_path"], paths["breakdown_path"],
                             paths["provenance_path"])
    fig = C.domain_chart(metrics)
    assert isinstance(fig, Figure) and len(fig.axes[0].patches) == 4  # one bar per domain
    assert len(C.parts_chart(metrics).axes[0].patches) == 9  # three series over 1, 2, 3 parts
    data = C.png(fig)
    assert data.startswith(b"\x89PNG") and b"Software" not in data
    assert C.png(C.domain_chart(metrics)) == data
    assert C.png(C.domain_chart({})) != data  # "no items" is drawn, not the same picture


def test_notebook_builds_no_html_itself() -> None:
    nb = nbformat.read(REPO_ROOT / R.NOTEBOOK, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "H.table(" in code and "C.png(" in code
    assert not re.search(r"<\w", code) and "HTML(" not in code  # markup comes from templates
    imported = set(re.findall(r"^from rimo_eval\.report import (\w+)", code, re.MULTILINE))
    assert imported == set(R.NOTEBOOK_MODULES)
    assert [m.__name__.rsplit(".", 1)[1] for m in R.notebook_modules()] == list(R.NOTEBOOK_MODULES)


def test_provenance_rows(tmp_path: Path) -> None:
    import pandas as pd

    paths = make_report_inputs(tmp_path)
    preds = {TRACK_N: pd.read_parquet(paths["predictions_n_path"])}
    rows = T.provenance_rows(load_params(paths["params_path"]).as_dict(),
                             {"items": paths["items_n_path"]}, preds, "abc123")
    table = {(s, i): v for s, i, v in rows.itertuples(index=False, name=None)}
    assert table[("artifact sha256", "items")] == sha256_file(paths["items_n_path"])
    assert table[("predictions RIMO-N", "backend")] == "replay"
    assert table[("params", "predict.limit")] == "7"
    assert table[("params", "predict.replay.path")] == "data/replay/example.jsonl"
    assert table[("code", "git commit")] == "abc123"


def test_git_commit_outside_repository(tmp_path: Path) -> None:
    assert runner.git_commit(tmp_path) == "unknown"
    assert runner.git_commit(tmp_path / "does-not-exist") == "unknown"


def test_strip_volatile() -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"start_time": "t", "end_time": "t", "duration": 1.0,
                                "version": "2.7.0", "environment_variables": {},
                                "input_path": "/abs/in.ipynb", "output_path": None,
                                "parameters": {"x": 1}}
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata.update(tags=["injected-parameters"], execution={"iopub.status.busy": "t"},
                         papermill={"start_time": "t", "duration": 0.1, "status": "completed"})
    nb.cells.append(cell)
    runner.strip_volatile(nb)
    assert nb.metadata.papermill == {"parameters": {"x": 1}}
    assert cell.metadata == {"tags": ["injected-parameters"],
                             "papermill": {"status": "completed"}}
    assert cell.id == "injected-parameters"
    # A cell without an id (or a clashing one) gets a positional id, never the injected one.
    nb.cells.append(nbformat.v4.new_code_cell("y = 2"))
    nb.cells[1]["id"] = ""
    nb.cells.append(nbformat.v4.new_code_cell("z = 3"))
    nb.cells[2]["id"] = "injected-parameters"
    runner.strip_volatile(nb)
    assert [c.id for c in nb.cells] == ["injected-parameters", "cell-1", "cell-2"]


def test_pct_and_banner() -> None:
    assert T.pct(0.5) == "50.0%" and T.pct(None) == "—" and T.pct(float("nan")) == "—"
    assert H.sample_banner({"sample": {"is_sample": False}}) == ""
    assert H.sample_banner({}) == ""
    banner = H.sample_banner({"sample": {"is_sample": True, "limit": 3,
                                         "evaluated": {TRACK_N: 3, TRACK_P: 3},
                                         "total": {TRACK_N: 335, TRACK_P: 456}}})
    assert "3 of 335 RIMO-N and 3 of 456 RIMO-P" in banner
    assert "predict.limit = 3)" in banner  # recorded without a seed: none is shown
    assert H.sample_banner({"sample": {"is_sample": True, "seed": 4}}).count("predict.") == 0


def test_validation_tables_from_validator_report(tmp_path: Path) -> None:
    paths = make_report_inputs(tmp_path)
    tables = T.validation_tables(json.loads(paths["validation_path"].read_text("utf-8")))
    assert tables["errata"].to_dict("records")[0]["covers"] == "answer.mismatch"
    assert list(tables["findings"]["erratum"]) == ["E001"]  # from "covered_by"
    assert list(tables["by_rule"].itertuples(index=False, name=None)) == [
        ("answer.mismatch", 1, 0)]
    assert ("stored text", "RIMO-N.solution.strip", "2") in set(
        tables["normalisations"].itertuples(index=False, name=None))
    assert list(tables["warnings"]["rule"]) == ["text.control_char"]


def test_validation_tables_tolerate_other_shapes() -> None:
    tables = T.validation_tables({
        "errata_applied": [{"id": "E9", "reason": "r", "covers": ["a", "b"]}],
        "findings": ["not a dict", {"rule": "x", "erratum": "E9", "line": None},
                     {"rule": "y", "line": 12}],
        "findings_by_rule": {"x": "not a dict"}})
    assert tables["errata"].to_dict("records")[0]["covers"] == "a, b"
    assert list(tables["findings"]["erratum"]) == ["E9", None]
    html_text = H.table(tables["findings"])
    # Ints stay ints beside None.
    assert 'style="text-align: right">12</td>' in html_text and "12.0" not in html_text
    assert tables["counts"].empty and tables["by_rule"].empty
    assert T.validation_tables({"errata": {"applied": [{"id": "E1"}]}})["errata"]["id"][0] == "E1"
    assert all(t.empty for t in T.validation_tables({}).values())


def test_capped_table_counts_the_rest() -> None:
    import pandas as pd

    frame = pd.DataFrame({"message": [f"m{i}" for i in range(5)]})
    out = H.capped_table(frame, "reports/<v>.json", limit=2)
    assert "m1" in out and "m2" not in out and "3 more in reports/&lt;v&gt;.json" in out
