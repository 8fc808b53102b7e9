"""The year lens (issue 32): accuracy by competition-year band, the unseen subset against a
training cutoff, the k-aware year trend.

Hidden-style replays over the real 791 items (the oracle run's validated tables, read only):
each model answers right with a probability that falls with the year, on a shared latent item
difficulty, and misses a few items; k = 1 and k = 4. The real replay predict and score stages
run on them; every number is then checked against an independent computation from the items and
the replay file itself (never the score table), and against reference implementations:
statsmodels' Wilson and Newcombe intervals, scipy's Fisher test, a logistic fit by scipy.optimize.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.optimize import minimize
from scipy.stats import fisher_exact, norm
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from rimo_eval.errors import ConfigError
from rimo_eval.params.config import ScoreParams, load_params
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS
from rimo_eval.score.stage import score
from tests.support.factories import predict_section, section
from tests.support.leaderboard_runs import write_jsonl
from tests.support.paths import REPO_ROOT
from tests.support.year_runs import replay

BOOT = {"samples": 200, "seed": 0, "confidence": 0.95}
EDGES = [(1900, 1989), (1990, 2004), (2005, 2014), (2015, 2019), (2020, 2023)]
LABELS = ["<=1989", "1990-2004", "2005-2014", "2015-2019", "2020-2023"]


def independent(items: dict[str, pd.DataFrame], rows: list[dict[str, Any]]
                ) -> dict[str, pd.DataFrame]:
    """Per item and sample, right or not, straight from the gold and the replay file."""
    out = {}
    for track in TRACKS:
        df = items[track]
        if track == TRACK_P:
            df = df[df["gradable"]]
        gold = {r.problem_id: (r.answer.strip() if track == TRACK_N else list(r.sub_solutions))
                for r in df.itertuples()}
        got = {(r["problem_id"], r["sample"]): r["prediction"] for r in rows
               if r["track"] == track}
        samples = 1 + max(j for _, j in got)
        recs = []
        for pid, want in gold.items():
            for j in range(samples):
                pred = got.get((pid, j))
                ok = (pred is not None and pred.strip() == want) if track == TRACK_N else (
                    pred is not None and [p.strip() for p in pred] == [w.strip() for w in want])
                recs.append({"problem_id": pid, "sample": j, "year": int(pid[:4]), "ok": ok})
        out[track] = pd.DataFrame(recs)
    return out


@pytest.fixture(scope="module")
def runs(oracle_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Any]:
    """k -> (breakdown.json, the independent outcomes, the score tables)."""
    items_dir = oracle_run / "data/items"
    items = {t: pd.read_parquet(items_dir / f"rimo_{t[-1].lower()}.parquet") for t in TRACKS}
    out = {}
    for k in (1, 4):
        root = tmp_path_factory.mktemp(f"years-k{k}")
        rows = replay(items, f"m{k}", k)
        write_jsonl(root / "replay.jsonl", rows)
        predict(predict_section(backend="replay", samples=k, limit=None,
                                replay={"path": str(root / "replay.jsonl")}), items_dir,
                root / "preds")
        cfg = section(ScoreParams, "score", bootstrap=BOOT, training_cutoff="2019-06")
        score(cfg, items_dir, root / "preds", root / "scores", root / "metrics.json",
              root / "plots")
        breakdown = json.loads((root / "breakdown.json").read_text(encoding="utf-8"))
        scores = {t: pd.read_parquet(root / "scores" / f"rimo_{t[-1].lower()}.parquet")
                  for t in TRACKS}
        out[k] = (breakdown, independent(items, rows), scores, root)
    return out


OUTCOME = {TRACK_N: "accuracy", TRACK_P: "strict"}


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("track", TRACKS)
def test_every_band_equals_an_independent_count(runs: dict, track: str, k: int) -> None:
    breakdown, truth, _, _ = runs[k]
    bands = breakdown[track]["by_year_band"]
    first = truth[track][truth[track]["sample"] == 0]  # bands are on sample 0, as the headline
    assert set(bands) == set(LABELS)
    name = OUTCOME[track]
    for label, (lo, hi) in zip(LABELS, EDGES, strict=True):
        part = first[(first["year"] >= lo) & (first["year"] <= hi)]
        right, n = int(part["ok"].sum()), len(part)
        cell = bands[label]
        assert (cell["n"], cell["right"]) == (n, right), label
        assert cell[name] == pytest.approx(right / n, abs=1e-6)
        low, high = proportion_confint(right, n, alpha=0.05, method="wilson")
        assert cell[f"{name}_ci_low"] == pytest.approx(low, abs=1e-6)
        assert cell[f"{name}_ci_high"] == pytest.approx(high, abs=1e-6)
    # The counts of the benchmark: RIMO-N 124 items from 2015 on, 64 from 2020 on;
    # RIMO-P 63 from 2020 on (all gradable).
    recent = bands["2015-2019"]["n"] + bands["2020-2023"]["n"]
    assert (recent, bands["2020-2023"]["n"]) == ((124, 64) if track == TRACK_N else (154, 63))


@pytest.mark.parametrize("track", TRACKS)
def test_unseen_subset_newcombe_and_fisher_match_references(runs: dict, track: str) -> None:
    breakdown, truth, _, _ = runs[1]
    unseen = breakdown[track]["unseen"]
    first = truth[track]
    after = first["year"] > 2019  # cutoff 2019-06: the competition's year stands for its date
    ua, un = int(first.loc[after, "ok"].sum()), int(after.sum())
    sa, sn = int(first.loc[~after, "ok"].sum()), int((~after).sum())
    assert unseen["cutoff"] == "2019-06"
    assert (unseen["unseen"]["n"], unseen["unseen"]["right"]) == (un, ua)
    assert (unseen["seen"]["n"], unseen["seen"]["right"]) == (sn, sa)
    assert unseen["difference"] == pytest.approx(ua / un - sa / sn, abs=1e-6)
    low, high = confint_proportions_2indep(ua, un, sa, sn, method="newcomb", compare="diff")
    assert unseen["difference_ci_low"] == pytest.approx(low, abs=1e-6)
    assert unseen["difference_ci_high"] == pytest.approx(high, abs=1e-6)
    p = fisher_exact([[ua, un - ua], [sa, sn - sa]]).pvalue
    assert unseen["fisher_p"] == pytest.approx(p, rel=1e-5)
    assert unseen["difference"] < 0  # the replays fall with the year


def reference_fit(year: np.ndarray, ok: np.ndarray) -> tuple[float, float]:
    """Logistic regression of per-sample 0/1 on the year by direct maximum likelihood
    (scipy.optimize, analytic gradient), and the slope's model-based standard error."""
    x = np.column_stack([np.ones(len(year)), year - 1990.0])

    def nll(b: np.ndarray) -> tuple[float, np.ndarray]:
        eta = x @ b
        loss = float(np.sum(np.logaddexp(0, eta) - ok * eta))
        return loss, x.T @ (1 / (1 + np.exp(-eta)) - ok)

    best = minimize(nll, np.zeros(2), jac=True, method="BFGS", options={"gtol": 1e-12})
    pr = 1 / (1 + np.exp(-(x @ best.x)))
    info = x.T @ (x * (pr * (1 - pr))[:, None])
    return float(best.x[1]), float(np.sqrt(np.linalg.inv(info)[1, 1]))


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("track", TRACKS)
def test_trend_slope_equals_a_reference_fit(runs: dict, track: str, k: int) -> None:
    breakdown, truth, _, _ = runs[k]
    trend = breakdown[track]["year_trend"]
    rows = truth[track]
    slope, se = reference_fit(rows["year"].to_numpy(float), rows["ok"].to_numpy(float))
    assert trend["slope"] == pytest.approx(slope, abs=1e-6)
    assert (trend["samples"], trend["n_items"]) == (k, rows["problem_id"].nunique())
    assert trend["slope"] < 0 and trend["slope_ci_high"] < 0
    # k = 1: plain logistic regression, Wald interval and z test. k = 4: the same slope, the
    # interval widened by the Pearson dispersion of the per-item counts (never narrowed).
    scale = 1.0 if k == 1 else np.sqrt(trend["dispersion"])
    assert trend["dispersion"] >= 1.0
    z = norm.ppf(0.975)
    assert trend["slope_ci_low"] == pytest.approx(slope - z * se * scale, abs=1e-5)
    assert trend["slope_ci_high"] == pytest.approx(slope + z * se * scale, abs=1e-5)
    assert trend["p_value"] == pytest.approx(2 * norm.sf(abs(slope) / (se * scale)), rel=1e-3)


def test_score_table_records_year_and_shortlist_label(runs: dict) -> None:
    _, _, scores, _ = runs[1]
    n = scores[TRACK_N].set_index("problem_id")
    assert n.loc["2023a1", "year"] == 2023 and n.loc["2023a1", "shortlist"] == "A1"
    assert n.loc["1959p2", "year"] == 1959 and pd.isna(n.loc["1959p2", "shortlist"])
    p = scores[TRACK_P]
    assert (p["year"] == p["problem_id"].str[:4].astype(int)).all()


def test_year_plots_are_in_year_order_with_intervals(runs: dict) -> None:
    _, _, _, root = runs[1]
    table = pd.read_csv(root / "plots/rimo_p_by_year.csv")
    assert list(table["band"]) == LABELS  # breakdown.json sorts keys: "<=1989" would be last
    assert list(table.columns) == ["band", "strict", "strict_ci_low", "strict_ci_high", "n"]


def test_no_cutoff_no_unseen_block_and_an_all_right_run_has_no_slope(oracle_run: Path) -> None:
    breakdown = json.loads((oracle_run / "reports/breakdown.json").read_text(encoding="utf-8"))
    for track in TRACKS:
        assert "unseen" not in breakdown[track]
        trend = breakdown[track]["year_trend"]
        assert trend["slope"] is None and trend["reason"] == "every answer right"
        assert all(c[OUTCOME[track]] == 1.0 for c in breakdown[track]["by_year_band"].values())


@pytest.mark.parametrize("value, expected", [
    ("2024-06", "2024-06"), (2024, "2024"), ("2024-06-01", "2024-06-01"), (None, None)])
def test_training_cutoff_param_forms(tmp_path: Path, value: Any, expected: Any) -> None:
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    text = (REPO_ROOT / "params.yaml").read_text(encoding="utf-8").replace(
        "training_cutoff: null", f"training_cutoff: {value if value is not None else 'null'}")
    assert params["score"]["training_cutoff"] is None
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_params(path).score.training_cutoff == expected


def test_a_bad_training_cutoff_names_its_key(tmp_path: Path) -> None:
    text = (REPO_ROOT / "params.yaml").read_text(encoding="utf-8").replace(
        "training_cutoff: null", "training_cutoff: June 2024")
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"score\.training_cutoff.*YYYY-MM"):
        load_params(path)


@pytest.mark.slow
def test_setting_a_cutoff_reruns_score_never_predict(oracle_run: Path, tmp_path: Path) -> None:
    """``dvc exp run -S score.training_cutoff=...``: metadata of score, not of the predictions."""
    from tests.support.pipeline_repo import copy_repo, sh

    root = copy_repo(oracle_run, tmp_path / "repo")
    params_file = root / "params.yaml"
    params = yaml.safe_load(params_file.read_text(encoding="utf-8"))
    params["score"]["training_cutoff"] = "2019-06"
    params_file.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    stale = set(json.loads(sh(root, "dvc", "status", "--json").stdout))
    # view: its unseen filter reads the cutoff; judge: only through score's outs.
    assert stale == {"check-params", "score", "view", "report"}
    sh(root, "dvc", "repro", "-q", "score")
    breakdown = json.loads((root / "reports/breakdown.json").read_text(encoding="utf-8"))
    unseen = breakdown[TRACK_N]["unseen"]
    assert (unseen["cutoff"], unseen["unseen"]["n"], unseen["seen"]["n"]) == ("2019-06", 64, 271)
    assert unseen["difference"] == 0.0 and unseen["fisher_p"] == 1.0  # the oracle: all right
    assert "predict" not in set(json.loads(sh(root, "dvc", "status", "--json").stdout))


def test_the_report_draws_the_year_chart_only_for_scores_with_bands() -> None:
    from rimo_eval.report.years import has_bands
    from rimo_eval.score.years import by_year_band

    # Scores made before the year lens have no bands: the report says so instead of drawing
    # an empty chart.
    assert not has_bands({"RIMO-N": {"accuracy": 0.5}, "RIMO-P": {}})
    empty = by_year_band(np.array([], dtype=int), np.array([], dtype=bool), "accuracy", 0.95)
    assert not has_bands({"RIMO-N": {"by_year_band": empty}})
    one = by_year_band(np.array([2001]), np.array([True]), "accuracy", 0.95)
    assert has_bands({"RIMO-N": {"by_year_band": one}})
