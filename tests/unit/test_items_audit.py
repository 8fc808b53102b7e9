"""The item audit's statistics on synthetic runs: the 2PL fit recovers planted parameters, the
gold check finds planted wrong golds among hard 0/1 items and shared trap answers, and what it
cannot take it refuses or reports as such."""

from __future__ import annotations

import jsonschema
import numpy as np
import pytest

from rimo_eval.commands.items.audit import ItemsError, Matrix, audit, suggested_errata
from rimo_eval.commands.items.gold import check_golds
from rimo_eval.commands.items.irt import fit_2pl
from rimo_eval.rimo.tracks import TRACK_N
from rimo_eval.validate.errata import ERRATA_SCHEMA
from tests.support.irt_population import Population, draw

SEEDS = range(5)


def _matrix(pop: Population) -> Matrix:
    return Matrix(runs=[f"run{r}" for r in range(pop.answers.shape[0])],
                  tracks=[TRACK_N] * len(pop.gold), problem_ids=pop.problem_ids,
                  gold=list(pop.gold), correct=pop.correct, answers=pop.answers)


def test_the_fit_recovers_a_2pl_population() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0, 0.3, 300), rng.normal(0, 1, 300)
    theta = rng.normal(0, 1, 200)
    y = rng.random((200, 300)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    fit = fit_2pl(y.astype(float))
    assert fit.converged
    assert np.corrcoef(fit.difficulty, b)[0, 1] > 0.95
    assert np.corrcoef(fit.discrimination, a)[0, 1] > 0.5
    assert np.corrcoef(fit.ability, theta)[0, 1] > 0.95
    # The Wald intervals cover the true difficulty about as often as they say (95%).
    low = fit.difficulty - 1.96 * fit.difficulty_se
    high = fit.difficulty + 1.96 * fit.difficulty_se
    assert 0.85 < np.mean((low <= b) & (b <= high)) <= 1.0


def test_a_fit_that_does_not_converge_gives_no_numbers() -> None:
    pop = draw(0, runs=10, items=60, planted=2, planted_binary=1)
    result = audit(_matrix(pop))
    assert result["irt"]["converged"] and all("irt" in row for row in result["items"])
    fit = fit_2pl(pop.correct.astype(float), max_iter=2)
    assert not fit.converged and fit.iterations == 2


def test_planted_wrong_golds_are_found_and_hard_binary_items_are_not() -> None:
    found = planted = flagged = 0
    binary_flagged_wrongly = 0
    for seed in SEEDS:
        pop = draw(seed)
        result = audit(_matrix(pop))
        suspects = set(result["suspect_gold"]["items"])
        found += len(suspects & pop.planted)
        planted += len(pop.planted)
        flagged += len(suspects)
        binary_flagged_wrongly += len((suspects - pop.planted) & pop.binary)
        # Hard 0/1 items are there: some no more than a third of the runs solved.
        hard_binary = [r for r in result["items"]
                       if r["problem_id"] in pop.binary - pop.planted and r["solve_rate"] < 0.34]
        assert hard_binary
    precision, recall = found / flagged, found / planted
    # Measured at these seeds: precision 1.00, recall 0.78 (non-0/1 items 38/40, 0/1 items 9/20).
    assert precision >= 0.9, precision
    assert recall >= 0.7, recall
    assert binary_flagged_wrongly == 0


def test_agreement_from_weak_runs_on_a_shared_trap_is_not_suspect() -> None:
    # Six weak runs give the trap 7; three strong runs give the gold.
    strength = np.array([0.9, 0.85, 0.8, 0.2, 0.2, 0.15, 0.1, 0.1, 0.1])
    answers = np.array([["42"], ["42"], ["42"], ["7"], ["7"], ["7"], ["7"], ["7"], ["7"]],
                       dtype=object)
    correct = answers == "42"
    check = check_golds(["x"], ["42"], answers, correct, strength)[0]
    assert check.answer == "7" and not check.suspect


def test_too_few_runs_are_refused() -> None:
    pop = draw(1, runs=2, items=30, planted=2, planted_binary=1)
    with pytest.raises(ItemsError, match="at least 3 runs"):
        audit(_matrix(pop))


def test_flags_and_suggested_errata() -> None:
    pop = draw(0)
    result = audit(_matrix(pop))
    by_id = {r["problem_id"]: r for r in result["items"]}
    for row in result["items"]:
        assert ("never_solved" in row["flags"]) == (row["solved_by"] == 0)
        assert ("always_solved" in row["flags"]) == (row["solved_by"] == len(result["runs"]))
    suspects = result["suspect_gold"]["items"]
    errata = suggested_errata(result, ["a", "b"])
    jsonschema.validate(errata, ERRATA_SCHEMA)
    assert [e["problem_id"] for e in errata["errata"]] == suspects
    for entry in errata["errata"]:
        i = pop.problem_ids.index(entry["problem_id"])
        # The suggested value is the planted item's true answer.
        assert entry["value"] == pop.truth[i] != by_id[entry["problem_id"]]["gold"]
