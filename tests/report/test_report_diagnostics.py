"""The report's run header, error bars, diagnostics and item selections: the selection
functions on the fixture run, and one render through the real papermill kernel."""

from __future__ import annotations

import contextlib
import html
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from rimo_eval.artifacts.metrics_files import read_all
from rimo_eval.artifacts.model_name import predictions_model
from rimo_eval.params.config import load_params
from rimo_eval.report import charts as C
from rimo_eval.report import html as H
from rimo_eval.report import selection as S
from rimo_eval.report import stage as R
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.paths import REPO_ROOT
from tests.support.report_fixtures import LENIENT_ID, XSS_TEXT, make_report_inputs


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    return make_report_inputs(tmp_path)


def _frames(paths: dict[str, Path]) -> dict[str, pd.DataFrame]:
    return {k: pd.read_parquet(v) for k, v in paths.items() if str(v).endswith(".parquet")}


def _metrics(paths: dict[str, Path]) -> dict:
    return read_all(paths["metrics_path"], paths["breakdown_path"], paths["provenance_path"])


# --- selections ----------------------------------------------------------------------------------
def test_view_links_stay_inside_the_site() -> None:
    assert S.view_href(TRACK_N, "2005p1") == "view/index.html#item=RIMO-N:2005p1"
    assert S.view_href(TRACK_P, "2023a2") == "view/index.html#item=RIMO-P:2023a2"
    hostile = S.view_href(TRACK_N, '"><script>x</script> javascript:alert(1)')
    assert hostile.startswith("view/index.html#item=RIMO-N:")
    assert not re.search(r"[\"<> ]", hostile)


def test_lenient_differs_lists_the_item_with_its_text(inputs: dict[str, Path]) -> None:
    f = _frames(inputs)
    differs = S.lenient_differs(f["scores_n_path"], f["predictions_n_path"], f["items_n_path"], 10)
    assert differs["problem_id"].tolist() == [LENIENT_ID]
    row = differs.iloc[0]
    assert (row["gold"], row["prediction"], row["finish"]) == ("120", r"\text{120}", "length")
    assert row["model text"].startswith(r"So \boxed{\text{120}}")
    assert row["view"] == f"view/index.html#item=RIMO-N:{LENIENT_ID}"
    assert f"Problem {LENIENT_ID}" in row["problem"]
    assert S.lenient_differs(f["scores_n_path"], f["predictions_n_path"], f["items_n_path"],
                             0).empty


def test_flagged_picks_wrong_answers_each_flag_in_turn(inputs: dict[str, Path]) -> None:
    f = _frames(inputs)
    picked, total = S.flagged(f["scores_n_path"], f["predictions_n_path"], f["items_n_path"], 10)
    # Right answers are never listed, whatever their flags (2023c1 has no box but is right);
    # missing and error rows have no reply, so no flag.
    assert total == 2 and picked["problem_id"].tolist() == ["2023a4", LENIENT_ID]
    assert dict(zip(picked["problem_id"], picked["flags"], strict=True)) == {
        "2023a4": "no_box", LENIENT_ID: "gold_in_text, truncated"}
    assert picked.iloc[0]["model text"] == XSS_TEXT  # the text itself, escaped later
    one, _ = S.flagged(f["scores_n_path"], f["predictions_n_path"], f["items_n_path"], 1)
    assert one["problem_id"].tolist() == [LENIENT_ID]  # gold_in_text comes first


def test_flagged_round_robin_keeps_rare_flags_visible() -> None:
    rows = [{"problem_id": f"t{i:03d}", "sample": 0, "correct": False, "gold": "1",
             "prediction": "", "lenient_match": False, **dict.fromkeys(S.FLAGS, False),
             "truncated": True} for i in range(50)]
    rows.append({**rows[0], "problem_id": "z999", "truncated": False, "empty_box": True})
    scores = pd.DataFrame(rows)
    empty = pd.DataFrame(columns=["problem_id", "sample", "details", "problem"])
    picked, total = S.flagged(scores, empty, empty, 3)
    assert total == 51 and "z999" in picked["problem_id"].tolist() and len(picked) == 3


def test_older_scores_without_flags_give_empty_selections(inputs: dict[str, Path]) -> None:
    f = _frames(inputs)
    old = f["scores_n_path"].drop(columns=["no_box", "lenient_match"])
    assert not S.has_flags(old)
    assert S.lenient_differs(old, f["predictions_n_path"], f["items_n_path"], 10).empty
    assert S.flagged(old, f["predictions_n_path"], f["items_n_path"], 10)[1] == 0


def test_parts_side_by_side_shows_reference_next_to_model_text(inputs: dict[str, Path]) -> None:
    f = _frames(inputs)
    rows = S.parts_side_by_side(f["scores_p_path"], f["predictions_p_path"], f["items_p_path"],
                                10)
    assert rows["problem_id"].drop_duplicates().tolist() == ["2022c5", "2022g4", "2022n3"]
    c5 = rows[rows["problem_id"] == "2022c5"]
    assert c5["part"].tolist() == ["1/2", "2/2"] and c5["matched"].tolist() == ["✗", "✓"]
    assert c5["reference sub-solution"].tolist() == ["Proof of part 1.", "Proof of part 2."]
    assert c5["model's text"].tolist() == ["My proof of part 1 of 2022c5.",
                                           "My proof of part 2 of 2022c5."]
    assert c5["sub-problem"].iloc[0] == "Part 1 of 2022c5: prove it."
    assert c5["finish"].tolist() == ["stop", "stop"]
    # An item without per-part replies (2022g4): its answers, part by part.
    g4 = rows[rows["problem_id"] == "2022g4"]
    assert g4["model's text"].tolist()[0] == "My proof of part 1 of 2022g4."
    assert set(g4["finish"]) == {"—"}
    assert len(S.parts_side_by_side(f["scores_p_path"], f["predictions_p_path"],
                                    f["items_p_path"], 1)) == 2  # one item, its two parts


def test_excerpt_keeps_head_and_tail() -> None:
    text = "A" * 1000 + "MIDDLE" + "Z" * 1000
    out = S.excerpt(text, 100)
    assert out.startswith("A" * 50) and out.endswith("Z" * 50) and "MIDDLE" not in out
    assert "1906 characters left out" in out
    assert S.excerpt("short", 100) == "short" and S.excerpt(None) == ""


def test_run_rows_name_backend_model_experiment_k_and_scope(inputs: dict[str, Path]) -> None:
    f = _frames(inputs)
    metrics = _metrics(inputs)
    preds = {TRACK_N: f["predictions_n_path"], TRACK_P: f["predictions_p_path"]}
    rows = dict(S.run_rows(metrics, preds, "model-a", "0123456789abcdef" * 2 + "01234567"))
    # The model as reports/model.json names it (rimo_eval.artifacts.model_name), not "—".
    model = predictions_model(preds.values())
    assert model is not None and model.startswith("replay ")
    assert rows == {"backend": "replay", "model": model, "experiment": "model-a",
                    "samples per item (k)": "1",
                    "evaluated": "sample: 8 of 335 RIMO-N, 5 of 456 RIMO-P",
                    "code": "0123456789ab"}
    metrics[TRACK_N]["k"] = 4
    metrics["sample"]["is_sample"] = False
    preds[TRACK_N] = preds[TRACK_N].assign(backend="openai",
                                            backend_params='{"model": "gpt-x"}')
    rows = dict(S.run_rows(metrics, preds))
    assert rows["samples per item (k)"] == "4" and rows["model"] == "openai gpt-x"
    assert rows["evaluated"].startswith("full benchmark") and rows["experiment"].startswith("—")


def test_tables_for_diagnostics(inputs: dict[str, Path]) -> None:
    f = _frames(inputs)
    metrics = _metrics(inputs)
    flags = S.flag_table(metrics, f["scores_n_path"]).set_index("flag")
    assert flags.loc["gold_in_text", "replies"] == 1 and flags.loc["no_box", "replies"] == 4
    assert flags.loc["lenient_match", "share"] == "62.5%"
    strict = S.strict_lenient_table(metrics)
    assert strict["value"].tolist() == ["50.0%", "62.5%"]
    assert strict["95% interval"].tolist() == ["[25.0%, 75.0%]", "[37.5%, 87.5%]"]


# --- charts --------------------------------------------------------------------------------------
def _error_bars(fig) -> list[ErrorbarContainer]:
    return [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]


def test_every_chart_draws_the_recorded_intervals(inputs: dict[str, Path]) -> None:
    metrics = _metrics(inputs)
    for chart, series in ((C.headline_chart, 1), (C.domain_chart, 1), (C.parts_chart, 3)):
        fig = chart(metrics)
        bars = _error_bars(fig)
        assert len(bars) == series, chart.__name__
    # The headline chart: exact match's interval, lenient accuracy (grey) with its own.
    fig = C.headline_chart(metrics)
    (container,) = _error_bars(fig)
    segments = container.lines[2][0].get_segments()
    assert [tuple(round(y, 6) for y in (s[0][1], s[1][1])) for s in segments[:2]] == [
        (0.25, 0.75), (0.375, 0.875)]
    # Parts: strict and prefix score have intervals per group, sub-problem accuracy none.
    strict, sub, _prefix = _error_bars(C.parts_chart(metrics))
    drawn = [len([s for s in c.lines[2][0].get_segments() if len(s)]) for c in (strict, sub)]
    assert drawn[0] >= 2 and drawn[1] == 0
    assert C.bounds({"low": None, "high": 1}) is None
    assert C.flat_bounds({"x_ci_low": 0.1, "x_ci_high": 0.2}, "x") == (0.1, 0.2)


# --- the rendered report -------------------------------------------------------------------------
def test_rendered_report_header_link_and_selections(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    make_report_inputs(tmp_path)
    (tmp_path / "notebooks").mkdir()
    shutil.copyfile(REPO_ROOT / R.NOTEBOOK, tmp_path / R.NOTEBOOK)
    monkeypatch.setenv("DVC_EXP_NAME", "<b>exp-1</b>")  # names are user text too
    with contextlib.chdir(tmp_path):
        R.run(load_params())
    page = (tmp_path / R.OUT_HTML).read_text(encoding="utf-8")
    # The header comes before everything else and names the run.
    head = page.index("This report shows one run")
    assert head < page.index("SAMPLE RUN") < page.index("Headline metrics")
    assert "&lt;b&gt;exp-1&lt;/b&gt;" in page and "<b>exp-1" not in page
    assert "sample: 8 of 335 RIMO-N, 5 of 456 RIMO-P" in page
    # Links into the browser, relative to reports/report.html, one per listed item.
    hrefs = re.findall(r'<a href="([^"]*)"', page)
    view = [h for h in hrefs if h.startswith("view/")]
    assert "view/index.html" in view
    assert f"view/index.html#item=RIMO-N:{LENIENT_ID}" in view
    assert "view/index.html#item=RIMO-P:2022c5" in view
    assert not any(h.startswith(("javascript:", "data:")) for h in hrefs)
    # The gold column never wraps.
    gold_cell = re.search(r'<td class="rimo-right rimo-nowrap"[^>]*>120</td>', page)
    assert gold_cell and "white-space: nowrap" in gold_cell.group(0)
    # The strict-vs-lenient item with its text, and the RIMO-P reference next to the model.
    assert html.escape(r"So \boxed{\text{120}} degrees, and") in page
    assert "Proof of part 1.</pre></td><td" in page and "My proof of part 1 of 2022c5." in page
    # Four charts, each a PNG: headline, domains, parts, competition years.
    assert page.count('src="data:image/png;base64,') == 4
    # The diagnostics are labelled as such, and the old "worst failures" list is gone.
    assert "lenient match (diagnostic, not the metric)" in page
    assert "Worst failures" not in page
    nb = json.loads((tmp_path / R.OUT_IPYNB).read_text(encoding="utf-8"))
    assert nb["metadata"]["papermill"]["parameters"]["experiment"] == "<b>exp-1</b>"


def test_table_links_are_escaped_and_hidden_columns_not_shown() -> None:
    frame = pd.DataFrame({"problem_id": ['a"><i>x'], "view": [S.view_href(TRACK_N, 'a"><i>x')],
                          "gold": ["123456789012345678901234567890"]})
    out = H.table(frame, links={"problem_id": "view"}, nowrap=["gold"])
    assert "<i>" not in out and "&lt;i&gt;x" in out
    assert ">view<" not in out  # the href column is not a column of its own
    assert 'href="view/index.html#item=RIMO-N:a%22%3E%3Ci%3Ex"' in out
    assert "white-space: nowrap" in out


def test_report_of_a_run_from_before_the_flags(tmp_path: Path) -> None:
    """Older runs: scores without the flag columns, metrics without diagnostics or per-group
    intervals. The report still renders, says so, and draws the intervals it has."""
    import pyarrow.parquet as pq

    from rimo_eval.io.atomic import write_json
    from rimo_eval.score.diagnostics import FLAGS_N

    paths = make_report_inputs(tmp_path)
    table = pq.read_table(paths["scores_n_path"])
    pq.write_table(table.drop_columns(list(FLAGS_N)), paths["scores_n_path"])
    table = pq.read_table(paths["scores_p_path"])
    pq.write_table(table.drop_columns(["truncated"]), paths["scores_p_path"])
    metrics = json.loads(paths["metrics_path"].read_text(encoding="utf-8"))
    metrics[TRACK_N].pop("diagnostics")
    breakdown = json.loads(paths["breakdown_path"].read_text(encoding="utf-8"))
    for block in (metrics[TRACK_N], breakdown[TRACK_N]):  # whichever file holds them
        block.pop("by_domain_ci", None)
    write_json(paths["metrics_path"], metrics, sort_keys=False)
    write_json(paths["breakdown_path"], breakdown)
    (tmp_path / "notebooks").mkdir()
    shutil.copyfile(REPO_ROOT / R.NOTEBOOK, tmp_path / R.NOTEBOOK)
    with contextlib.chdir(tmp_path):
        R.run(load_params())
    page = (tmp_path / R.OUT_HTML).read_text(encoding="utf-8")
    assert "scores predate the diagnostic flags." in page
    assert "Wrong answers the flags explain" not in page
    assert "lowest prefix scores, part by part" in page  # RIMO-P needs no flags
    assert page.count('src="data:image/png;base64,') == 4  # the years come from the ids
    old = read_all(paths["metrics_path"], paths["breakdown_path"], paths["provenance_path"])
    segments = _error_bars(C.domain_chart(old))[0].lines[2][0].get_segments()
    assert len(segments) == 4 and not any(len(s) for s in segments)  # no interval: none drawn
