"""The opt-in RIMO-P judge against a scripted loopback judge server: verdict parsing, metrics,
samples, disabled no-op, calibration, and the audit/compare helpers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rimo_eval.artifacts import judge_record
from rimo_eval.artifacts.items import load_items
from rimo_eval.cli import main as cli_main
from rimo_eval.errors import StageError
from rimo_eval.judge import parse
from rimo_eval.judge.calibrate import derangement
from rimo_eval.judge.metrics import compare_rows, recompute_mismatches
from rimo_eval.judge.stage import DISABLED, JUDGE_SCHEMA, judge
from rimo_eval.params.config import JudgeParams
from rimo_eval.rimo.tracks import TRACK_P
from tests.support.chat_server import ChatServer
from tests.support.factories import n_item, p_item, params, section, write_items
from tests.support.judge_setup import (
    KEY_ENV,
    SECRET,
    candidate_of,
    hashed_reply,
    hashed_verdict,
    judge_cfg,
    judge_paths,
    project,
    scored,
    verdict_json,
    write_params,
)

BOOT = {"bootstrap": {"samples": 200, "seed": 0, "confidence": 0.95}}


pytestmark = [pytest.mark.chat_server(hang_s=5.0), pytest.mark.api_key(KEY_ENV, SECRET)]


# --- parsing ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("raw", "verdict", "reason", "how"), [
    ('{"verdict": "correct", "reason": "Sound."}', "correct", "Sound.", "json"),
    ('  {"verdict": " Incorrect ", "reason": "Gap."}\n', "incorrect", "Gap.", "json"),
    ('Verdict below.\n```json\n{"verdict": "correct", "reason": "ok"}\n```\n', "correct", "ok",
     "fenced"),
    ('```\n{"verdict": "incorrect"}\n```', "incorrect", "", "fenced"),
    ('For sets {1, 2} I find {"verdict": "incorrect", "reason": "wrong case"} overall.',
     "incorrect", "wrong case", "embedded"),
    ("It looks fine to me.", "unparsable", "", "none"),
    ('{"verdict": "partially correct", "reason": "half"}', "unparsable", "half", "json"),
    ('{"verdict": true}', "unparsable", "", "json"),
    ("[1, 2]", "unparsable", "", "none"),
    ('<think>{"verdict": "incorrect"} hmm</think>\n{"verdict": "correct", "reason": "r"}',
     "correct", "r", "json"),
    ('<think>{"verdict": "correct"} never finished', "unparsable", "", "none"),
    ("", "unparsable", "", "none"),
])
def test_parse_verdict(raw: str, verdict: str, reason: str, how: str) -> None:
    assert parse.parse_verdict(raw) == parse.Verdict(verdict, reason, how)


# --- the stage on scripted replies -----------------------------------------------------------
STYLES = {
    "json-correct": verdict_json("correct", "All steps hold."),
    "json-incorrect": '{"verdict": "Incorrect", "reason": "Step 2 <b>is</b> unjustified."}',
    "fenced": 'My verdict:\n```json\n{"verdict": "correct", "reason": "Fine."}\n```',
    "prose": 'After checking, {"verdict": "incorrect", "reason": "Gap in the induction."}.',
    "garbage": "I think it is probably fine, but I cannot be sure.",
    "think": '<think>{"verdict": "incorrect"}?</think>{"verdict": "correct", "reason": "Ok."}',
    "bad-word": '{"verdict": "partially correct", "reason": "Half."}',
}
# problem_id -> the style of reply to each part (the part's reference text names it)
SCRIPT = {"a1": ["json-correct"], "b2": ["json-correct", "json-incorrect"],
          "c3": ["fenced", "prose", "garbage"], "d2": ["think", "json-correct"],
          "e1": ["bad-word"], "g1": ["[[fail:503:*]]"]}
# What each part must come out as, spelled out by hand from STYLES.
EXPECTED = {"a1": ["correct"], "b2": ["correct", "incorrect"],
            "c3": ["correct", "incorrect", "unparsable"], "d2": ["correct", "correct"],
            "e1": ["unparsable"], "g1": ["error"]}


def styled_reply(_body: dict[str, Any], prompt: str) -> str | None:
    style = candidate_of(prompt).split()[0]
    return STYLES.get(style)


@pytest.fixture
def styled(tmp_path: Path) -> Path:
    write_items(tmp_path / "data/items", [n_item("2001a1", "1")],
                [p_item(pid, [f"{s} proof of part {k} of {pid}" for k, s in enumerate(parts, 1)])
                 for pid, parts in SCRIPT.items()] + [p_item("h1", [""], gradable=False)])
    scored(tmp_path, {"backend": "oracle", "limit": None})
    return tmp_path


def test_each_reply_style_and_the_metrics(server: ChatServer, styled: Path) -> None:
    server.responder = styled_reply
    paths = judge_paths(styled)
    report = judge(params(judge=judge_cfg(server, styled), score=BOOT), **paths)
    table = pd.read_parquet(paths["table_path"])
    assert list(table.columns) == JUDGE_SCHEMA.names
    got = {pid: list(g.sort_values("part")["verdict"]) for pid, g in table.groupby("problem_id")}
    assert got == EXPECTED  # the ungradable h1 is not judged
    row = table.set_index(["problem_id", "part"]).loc[("b2", 2)]
    assert row["reason"] == "Step 2 <b>is</b> unjustified." and row["parse"] == "json"
    assert row["raw_text"] == STYLES["json-incorrect"]  # kept verbatim
    assert table.set_index(["problem_id", "part"]).loc[("c3", 1), "parse"] == "fenced"
    assert "503" in table.set_index("problem_id").loc["g1", "error"]
    assert table["exact_match"].all()  # the oracle: exact match says every part is right
    # Independently: prefix = leading "correct", over the parts; the mean over items.
    prefixes, strict, correct, parts = [], [], 0, 0
    for verdicts in EXPECTED.values():
        lead = next((i for i, v in enumerate(verdicts) if v != "correct"), len(verdicts))
        prefixes.append(lead / len(verdicts))
        strict.append(lead == len(verdicts))
        correct += verdicts.count("correct")
        parts += len(verdicts)
    j = report[TRACK_P]["judge"]
    assert j["prefix_score"] == round(sum(prefixes) / len(prefixes), 6)
    assert j["strict"] == round(sum(strict) / len(strict), 6)
    assert j["sub_problem_accuracy"] == round(correct / parts, 6)
    assert j["agreement_with_exact_match"] == round(correct / parts, 6)
    assert (j["n"], j["sub_problems"], j["unparsable"], j["errors"], j["ungradable"]) == \
        (6, 10, 2, 1, 1)
    assert j["model"] == "judge-model" and len(j["fingerprint"]) == 64
    assert set(table["fingerprint"]) == {j["fingerprint"]}
    assert j["ci"]["prefix_score"]["low"] <= j["prefix_score"] <= j["ci"]["prefix_score"]["high"]
    on_disk = json.loads(paths["metrics_path"].read_text())
    assert judge_record.read(on_disk) == report
    # On disk, numbers only (a DVC metrics file): the model and fingerprint sit in a list.
    assert all(isinstance(v, int | float) and not isinstance(v, bool)
               for v in on_disk[TRACK_P]["judge"].values())
    assert on_disk["run"] == [{"enabled": True, "model": "judge-model",
                               "fingerprint": j["fingerprint"], "note": report["note"]}]
    assert recompute_mismatches(table, report, BOOT["bootstrap"]) == []
    # Rerun over the warm cache: nothing sent but the failing request, byte-identical outputs.
    before = {p: paths[p].read_bytes() for p in ("table_path", "metrics_path")}
    sent = len(server.records)
    judge(params(judge=judge_cfg(server, styled), score=BOOT), **paths)
    assert {p: paths[p].read_bytes() for p in before} == before
    assert server.records[sent:] and all("[[fail:503:*]]" in r.prompt
                                         for r in server.records[sent:])


def test_a_judge_whose_requests_all_fail_fails_the_stage(server: ChatServer,
                                                         styled: Path) -> None:
    """Before, it wrote a record of zeros with every part an error, and exited 0."""
    server.fail_all = 400
    paths = judge_paths(styled)
    with pytest.raises(StageError, match=r"^judge: all 10 judge requests ended in an error; the "
                                         r"commonest \(10x\): .*HTTP 400"):
        judge(params(judge=judge_cfg(server, styled), score=BOOT), **paths)
    assert not paths["table_path"].exists() and not paths["metrics_path"].exists()


def test_prompt_follows_the_protocol(server: ChatServer, styled: Path) -> None:
    server.responder = styled_reply
    judge(params(judge=judge_cfg(server, styled), score=BOOT), **judge_paths(styled))
    item = {it.problem_id: it for it in load_items(TRACK_P, styled / "data/items")}["c3"]
    body = next(r.body for r in server.ok_records() if candidate_of(r.prompt).startswith("prose"))
    system, user = body["messages"]
    assert system["role"] == "system" and "strict" in system["content"]
    text = user["content"]
    assert "sub-problem 2 of 3" in text and "Be strict" in text
    # The official complete solution: the reference sub-solutions 1..n in order.
    assert "\n\n".join(item.sub_solutions) in text
    assert item.problem in text and candidate_of(text) == item.sub_solutions[1]
    assert body["model"] == "judge-model" and body["temperature"] == 0.0


def test_oracle_judged_always_correct_is_one(server: ChatServer, tmp_path: Path,
                                             mirror_dir: Path) -> None:
    root = project(tmp_path, mirror_dir, limit=12)
    server.responder = lambda _b, _p: verdict_json("correct")
    paths = judge_paths(root)
    j = judge(params(judge=judge_cfg(server, root), score=BOOT), **paths)[TRACK_P]["judge"]
    scores = pd.read_parquet(root / "data/scores/rimo_p.parquet")
    graded = scores[scores["gradable"]]
    assert (j["prefix_score"], j["strict"], j["sub_problem_accuracy"]) == (1.0, 1.0, 1.0)
    assert j["n"] == len(graded) and j["sub_problems"] == graded["number_of_parts"].sum()
    assert j["agreement_with_exact_match"] == 1.0 and j["agreement_n"] == j["sub_problems"]
    assert len(server.ok_records()) == j["sub_problems"]


def test_every_sample_is_judged(server: ChatServer, tmp_path: Path, mirror_dir: Path) -> None:
    """predict.samples: 2 (seeded: sample j is sent seed j) on the same server: the solver's
    replies name their sample; a judge rejecting sample 1 gives 0.5 on every measure."""
    predict_cfg = {"backend": "openai", "limit": 4, "samples": 2,
                   "openai": {"base_url": server.base_url, "model": "solver", "seed": 0,
                              "api_key_env": KEY_ENV, "cache_dir": str(tmp_path / "cache")}}

    def respond(body: dict, prompt: str) -> str:
        if "Candidate solution" not in prompt:  # the solver
            return f"A proof of this part (sample {body['seed']})."
        return verdict_json("incorrect" if "(sample 1)" in candidate_of(prompt) else "correct")

    server.responder = respond
    root = project(tmp_path, mirror_dir, limit=4, predict_cfg=predict_cfg)
    paths = judge_paths(root)
    j = judge(params(judge=judge_cfg(server, root), score=BOOT), **paths)[TRACK_P]["judge"]
    table = pd.read_parquet(paths["table_path"])
    assert sorted(set(table["sample"])) == [0, 1] and j["samples"] == 2
    assert (j["prefix_score"], j["strict"], j["sub_problem_accuracy"]) == (0.5, 0.5, 0.5)
    # Every sample is scored too (the scores table's sample column): exact match per sample.
    assert table["exact_match"].notna().all()
    assert table.groupby(["problem_id", "part"])["sample"].nunique().eq(2).all()


def test_disabled_is_a_no_op(server: ChatServer, styled: Path) -> None:
    paths = judge_paths(styled)
    outputs = {p: paths[p] for p in ("table_path", "metrics_path")}
    for _ in range(2):
        assert judge(params(judge={"enabled": False}), **paths) == DISABLED
        first = {p: f.read_bytes() for p, f in outputs.items()}
    assert server.records == []
    assert len(pd.read_parquet(paths["table_path"])) == 0
    assert pd.read_parquet(paths["table_path"]).columns.tolist() == JUDGE_SCHEMA.names
    on_disk = json.loads(paths["metrics_path"].read_text())
    assert judge_record.read(on_disk)["enabled"] is False and list(on_disk) == ["run"]
    judge(params(judge={"enabled": False}), **paths)
    assert {p: f.read_bytes() for p, f in outputs.items()} == first
    # Disabled needs nothing else: not even the inputs.
    for d in ("items_dir", "preds_dir", "scores_dir"):
        paths[d] = styled / "absent"
    assert judge(params(judge=None), **paths) == DISABLED


def test_config_errors_name_the_judge_section(server: ChatServer, styled: Path) -> None:
    from rimo_eval.errors import ConfigError

    with pytest.raises(ConfigError, match=r"judge\.modle: unknown key"):
        judge(params(judge={"enabled": True, "modle": "x"}), **judge_paths(styled))
    with pytest.raises(ConfigError, match=r"judge\.model must name"):
        judge(params(judge={"enabled": True}), **judge_paths(styled))
    assert server.records == []


def test_calibration_rates_are_exact(server: ChatServer, tmp_path: Path, mirror_dir: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path, mirror_dir, limit=1)
    server.responder = hashed_reply
    cfg = judge_cfg(server, root, enabled=False, calibration={"seed": 3, "limit": 40})
    write_params(root, cfg)
    monkeypatch.chdir(root)
    assert cli_main(["judge", "--calibrate"]) == 0
    result = json.loads((root / "reports/judge_calibration.json").read_text())
    items = {it.problem_id: it for it in load_items(TRACK_P, root / "data/items")}
    pairs, chosen = result["pairs"], set(result["pairs"]) | set(result["swapped"]["unpaired"])
    assert len(chosen) == 40 == result["items"] and all(items[p].gradable for p in chosen)
    # A derangement within groups of the same size: a permutation with no fixed point.
    assert sorted(pairs.values()) == sorted(pairs) and all(a != b for a, b in pairs.items())
    assert all(items[a].number_of_parts == items[b].number_of_parts for a, b in pairs.items())
    sizes = [items[p].number_of_parts for p in chosen]
    assert all(sizes.count(items[p].number_of_parts) == 1 for p in result["swapped"]["unpaired"])
    # Independently: the scripted verdict for every (item, candidate part).
    refs = [hashed_verdict(items[p].problem.strip(), s.strip())
            for p in sorted(chosen) for s in items[p].sub_solutions]
    swapped = [hashed_verdict(items[a].problem.strip(), s.strip())
               for a, b in pairs.items() for s in items[b].sub_solutions]
    assert result["true_positive_rate"] == round(refs.count("correct") / len(refs), 6)
    assert result["false_positive_rate"] == round(swapped.count("correct") / len(swapped), 6)
    assert result["references"]["unparsable"] == refs.count("unparsable")
    assert result["swapped"]["parts"] == len(swapped)
    assert 0 < result["true_positive_rate"] < 1 and 0 < result["false_positive_rate"] < 1


def test_derangement_is_seeded_and_stable() -> None:
    from rimo_eval.artifacts.items import Item

    def item(pid: str, parts: int) -> Item:
        return Item(TRACK_P, pid, "p", None, parts, True, pid,
                    sub_problems=("q",) * parts, sub_solutions=("s",) * parts)

    items = [item(f"x{i}", 1 + i % 3) for i in range(10)] + [item("alone", 4)]
    first = derangement(items, 7)
    assert first == derangement(list(reversed(items)), 7)  # input order does not matter
    assert "alone" not in first and len(first) == 10
    assert any(derangement(items, s) != first for s in range(8))  # the seed matters


def test_compare_rows_only_when_both_sides_judged() -> None:
    a = {"enabled": True, TRACK_P: {"judge": {"prefix_score": 0.25, "n": 4, "model": "m",
                                              "fingerprint": "f"}}}
    b = {"enabled": True, TRACK_P: {"judge": {"prefix_score": 0.5, "n": 4, "model": "m",
                                              "fingerprint": "f"}}}
    rows = {r["name"]: r for r in compare_rows(a, b)}
    assert rows["RIMO-P.judge.prefix_score"]["delta"] == 0.25
    assert rows["RIMO-P.judge.model"]["delta"] is None
    assert compare_rows(a, DISABLED) == [] and compare_rows({}, b) == []


def test_audit_recompute_catches_an_edited_metric(server: ChatServer, styled: Path) -> None:
    server.responder = styled_reply
    paths = judge_paths(styled)
    report = judge(params(judge=judge_cfg(server, styled), score=BOOT), **paths)
    table = pd.read_parquet(paths["table_path"])
    edited = json.loads(json.dumps(report))
    edited[TRACK_P]["judge"]["prefix_score"] = 0.9
    assert recompute_mismatches(table, edited, BOOT["bootstrap"]) == ["prefix_score"]
    flipped = table.copy()
    flipped.loc[0, "verdict"] = "incorrect"
    assert "sub_problem_accuracy" in recompute_mismatches(flipped, report, BOOT["bootstrap"])


def test_judge_template_is_in_the_judge_fingerprint_only(server: ChatServer,
                                                          tmp_path: Path) -> None:
    from rimo_eval.io.hashing import sha256_file
    from rimo_eval.judge import judging
    from rimo_eval.predictors.prompting import template_hashes

    path = Path(judging.__file__).parents[1] / "prompts/judge_rimo_p.txt"
    cfg = judge_cfg(server, tmp_path)
    assert judging.identity(judge_section(cfg))["template_sha256"] == sha256_file(path)
    assert "judge_rimo_p.txt" not in template_hashes()  # predictions' fingerprint unchanged
    # Operational knobs do not change the fingerprint; what decides a verdict does.
    fp = judging.judge_fingerprint(judge_section(cfg))
    assert judging.judge_fingerprint(
        judge_section({**cfg, "concurrency": 1, "cache_dir": "x"})) == fp
    assert judging.judge_fingerprint(judge_section({**cfg, "model": "other"})) != fp
    assert SECRET not in json.dumps(judging.identity(judge_section(cfg)))


def test_audit_recomputes_the_judge_metrics(server: ChatServer, styled: Path) -> None:
    from rimo_eval.commands.audit.command import audit

    server.responder = styled_reply
    paths = judge_paths(styled)
    judge(params(judge=judge_cfg(server, styled), score=BOOT), **paths)
    audited = params(score=BOOT)  # the params the judge ran with

    def judge_checks() -> list[tuple[str, str]]:
        return [(c.status, c.message) for c in audit(styled, audited).ledger.checks
                if c.kind == "judge"]

    assert [s for s, _ in judge_checks()] == ["ok"]
    report = json.loads(paths["metrics_path"].read_text())
    report[TRACK_P]["judge"]["strict"] = 0.5
    paths["metrics_path"].write_text(json.dumps(report))
    [(status, message)] = judge_checks()
    assert status == "break" and "strict do not recompute" in message


def test_compare_shows_judge_metrics_when_both_sides_have_them(styled: Path) -> None:
    from rimo_eval.commands.compare.command import Revision, Side, compare_sides, render_markdown

    scores = {t: pd.read_parquet(styled / f"data/scores/{f}") for t, f in
              (("RIMO-N", "rimo_n.parquet"), (TRACK_P, "rimo_p.parquet"))}
    from rimo_eval.artifacts.metrics_files import read_all

    metrics = read_all(styled / "reports/metrics.json", styled / "reports/breakdown.json",
                       styled / "reports/provenance.json")
    judged = {"enabled": True, TRACK_P: {"judge": {"prefix_score": 0.25, "n": 4,
                                                   "model": "m", "fingerprint": "f"}}}
    better = json.loads(json.dumps(judged))
    better[TRACK_P]["judge"]["prefix_score"] = 0.75

    def side(name: str, judge_json: dict) -> Side:
        return Side(Revision(name, "git", "0" * 40), metrics, scores, judge_json)

    both = compare_sides(side("a", judged), side("b", better), samples=50)
    text = render_markdown(both)
    assert "| RIMO-P.judge.prefix_score | 0.250000 | 0.750000 | +0.500000 | - |" in text
    one = compare_sides(side("a", judged), side("b", DISABLED), samples=50)
    assert "judge" not in render_markdown(one)


def test_compare_of_a_judged_run_and_a_sample_recomputes_judge_rows_on_shared_items(
        server: ChatServer, styled: Path) -> None:
    """Issue 29 §2: the judge rows too are over the items both runs have. B judged only three
    of A's six items: A's judge prefix score over those three is B's, so Δ is 0, though A's
    judge.json (all six) differs."""
    from rimo_eval.artifacts.metrics_files import read_all
    from rimo_eval.commands.compare.command import Revision, Side, compare_sides

    server.responder = styled_reply
    paths = judge_paths(styled)
    report = judge(params(judge=judge_cfg(server, styled), score=BOOT), **paths)
    table = pd.read_parquet(paths["table_path"])
    scores = {t: pd.read_parquet(styled / f"data/scores/{f}") for t, f in
              (("RIMO-N", "rimo_n.parquet"), (TRACK_P, "rimo_p.parquet"))}
    metrics = read_all(styled / "reports/metrics.json", styled / "reports/breakdown.json",
                       styled / "reports/provenance.json")
    few = ["a1", "b2", "c3"]
    shared = {**scores, TRACK_P: scores[TRACK_P][scores[TRACK_P]["problem_id"].isin(few)]}
    a = Side(Revision("a", "git", "0" * 40), metrics, scores, report, judge_table=table,
             model="model a")
    b = Side(Revision("b", "git", "1" * 40), metrics, shared, report,
             judge_table=table[table["problem_id"].isin(few)], model="model b")
    result = compare_sides(a, b, samples=50)
    # A, recomputed on the shared items, is still model a (its model was dropped there).
    assert (result["a"]["model"], result["b"]["model"]) == ("model a", "model b")
    assert result["items"][TRACK_P] == {"shared": 3, "only_a": 4, "only_b": 0,
                                        "changed_items": 0}
    rows = {r["name"]: r for r in result["metrics"]}
    prefix = rows[f"{TRACK_P}.judge.prefix_score"]
    # a1: 1/1, b2: 1/2, c3: 1/3 (EXPECTED), over those three only.
    assert prefix["a"] == prefix["b"] == round((1 + 1 / 2 + 1 / 3) / 3, 6)
    assert prefix["delta"] == 0 and report[TRACK_P]["judge"]["prefix_score"] != prefix["a"]
    assert rows[f"{TRACK_P}.judge.n"]["a"] == 3


def test_calibration_settings_are_checked() -> None:
    from rimo_eval.errors import ConfigError

    assert judge_section({"calibration": {"limit": 5}}).calibration.as_dict() == {"limit": 5}
    assert judge_section({"calibration": {"limit": 5}}).calibration.seed == 0
    # The typed config (params.config.JudgeParams) names the key path.
    with pytest.raises(ConfigError, match=r"judge\.calibration\.limt: unknown key"):
        judge_section({"calibration": {"limt": 5}})
    with pytest.raises(ConfigError, match=r"judge\.calibration\.limit: .*greater than or equal"):
        judge_section({"calibration": {"limit": 0}})
    with pytest.raises(ConfigError, match=r"judge\.enabled: .*valid boolean"):
        judge_section({"enabled": "yes"})


def judge_section(data: dict[str, Any]) -> JudgeParams:
    return section(JudgeParams, "judge", data)
