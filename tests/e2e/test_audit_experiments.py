"""`rimo-eval audit NAME` on real experiments of the full pipeline (issue 29 §1).

One repo for the module: a copy of the session's oracle run, committed as branch main, and two
`dvc exp run` experiments of the pipeline up to the judge (fetch to judge: every stage the
audit checks; the view and the report read the metrics and are no part of the chain): a
constant model with the judge off, and an oracle sample judged by the loopback fake chat
server. Two more branches
carry a tampered copy of an experiment. Before the fix every experiment and branch failed:
the temporary checkout lacked the judge table that reports/judge.json is recomputed from, and
the break named the temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.chat_server import ChatServer
from tests.support.in_process import audit_cli
from tests.support.judge_setup import KEY_ENV, SECRET, hashed_reply
from tests.support.pipeline_repo import copy_repo, env, sh

pytestmark = pytest.mark.slow

JUDGED, CONSTANT = "judged", "const-0"


def exp_commit(repo: Path, name: str) -> str:
    refs = sh(repo, "git", "for-each-ref", "--format=%(refname) %(objectname)",
              "refs/exps").stdout.split("\n")
    (sha,) = [line.split()[1] for line in refs if line.split() and
              line.split()[0].endswith(f"/{name}")]
    return sha


def tamper(repo: Path, base: str, path: str, edit: Callable[[dict[str, Any]], None],
           branch: str) -> None:
    """Branch ``branch``: the commit ``base`` with the JSON file ``path`` edited, made with git
    plumbing (a private index), so the workspace and its outputs stay as they are."""
    data = json.loads(sh(repo, "git", "show", f"{base}:{path}").stdout)
    edit(data)
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, env=env(),
                          input=json.dumps(data, indent=2), capture_output=True, text=True,
                          check=True).stdout.strip()
    index = {**env(), "GIT_INDEX_FILE": str(repo / ".git" / f"index-{branch}")}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=index, capture_output=True,
                              text=True, check=True).stdout.strip()

    git("read-tree", base)
    git("update-index", "--cacheinfo", f"100644,{blob},{path}")
    commit = git("commit-tree", git("write-tree"), "-p", base, "-m", f"tampered {path}")
    git("branch", branch, commit)
    os.unlink(index["GIT_INDEX_FILE"])


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, oracle_run: Path) -> Path:
    repo = copy_repo(oracle_run, tmp_path_factory.mktemp("audit-exps") / "repo")
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", "oracle run, judge off")
    server = ChatServer().start()
    server.responder = hashed_reply  # correct, incorrect or unparsable, by the input
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(KEY_ENV, SECRET)
            sh(repo, "dvc", "exp", "run", "-n", JUDGED, "judge", "-S", "predict.limit=12",
               "-S", "judge.enabled=true", "-S", "judge.model=judge-model",
               "-S", f"judge.base_url={server.base_url}", "-S", f"judge.api_key_env={KEY_ENV}",
               "-S", "judge.max_retries=1", "-S", "judge.concurrency=4")
    finally:
        server.stop()
    assert server.answered, "the judge stage sent no request"
    # Each exp run starts from the workspace the last one left: set every key that changed.
    sh(repo, "dvc", "exp", "run", "-n", CONSTANT, "judge", "-S", "predict.backend=constant",
       "-S", 'predict.constant.answer="0"', "-S", "predict.limit=null",
       "-S", "judge.enabled=false")
    # Back to main's run in the workspace (the last exp run left its outputs there).
    sh(repo, "git", "reset", "-q", "--hard")
    sh(repo, "dvc", "checkout", "-f")

    def judge_up(data: dict[str, Any]) -> None:
        data["RIMO-P"]["judge"]["prefix_score"] += 0.125

    def accuracy_up(data: dict[str, Any]) -> None:
        data["RIMO-N"]["accuracy"] = 0.5

    tamper(repo, exp_commit(repo, JUDGED), "reports/judge.json", judge_up, "tampered-judge")
    tamper(repo, exp_commit(repo, CONSTANT), "reports/metrics.json", accuracy_up,
           "tampered-metrics")
    return repo


def audit(repo: Path, name: str, cli: bool = False) -> tuple[dict[str, Any], str]:
    """``rimo-eval audit NAME --json``: the installed command when ``cli``, else its CLI entry
    in-process (tests.support.in_process)."""
    proc = (sh(repo, "rimo-eval", "audit", name, "--json", check=False) if cli
            else audit_cli(repo, name, "--json"))
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is (proc.returncode == 0)
    # Every message names paths as the repository does: not the temporary checkout, nor the
    # repository's own absolute path.
    assert "rimo-audit-" not in proc.stdout + proc.stderr
    assert str(repo) not in proc.stdout
    return report, proc.stderr


def test_intact_experiments_and_branches_pass_with_the_judge_on_and_off(repo: Path) -> None:
    judged = json.loads(sh(repo, "git", "show",
                           f"{exp_commit(repo, JUDGED)}:reports/judge.json").stdout)
    assert judged["run"][0]["enabled"] and judged["RIMO-P"]["judge"]["n"] > 0
    reports = {}
    for name, kind in ((JUDGED, "experiment"), (CONSTANT, "experiment"), ("main", "git")):
        report, err = reports[name] = audit(repo, name, cli=name == JUDGED)
        assert report["ok"], (name, report["breaks"])
        assert f"audit: {kind} {name} at " in err
        assert report["by_check"]["judge.recompute"] == {"ok": 1, "break": 0, "warning": 0}
        assert report["by_check"]["lock.md5"]["break"] == 0
    # The judged sample is audited as the 12-item run it is, not as the workspace's full run.
    n = {m["name"]: m["value"] for m in reports[JUDGED][0]["metrics"]}
    assert n["RIMO-N.n"] == n["RIMO-P.n"] + n["RIMO-P.ungradable"] == 12  # per track


def test_a_tampered_experiment_fails_naming_the_file_in_the_repository(repo: Path) -> None:
    report, _ = audit(repo, "tampered-judge")
    assert not report["ok"]
    (brk,) = report["breaks"]
    assert (brk["check"], brk["path"]) == ("judge.recompute", "reports/judge.json")
    assert brk["message"].startswith("reports/judge.json: prefix_score")
    assert brk["message"].endswith("do not recompute from data/judge/rimo_p.parquet")
    report, _ = audit(repo, "tampered-metrics")
    assert not report["ok"]
    assert {(b["check"], b["path"]) for b in report["breaks"]} >= {
        ("metrics.recompute", "reports/metrics.json")}
    assert any(b["message"].startswith("reports/metrics.json: RIMO-N.accuracy = 0.5 does not "
                                       "recompute") for b in report["breaks"])


# --- the same runs, read by the other tools through the run reader (issue 41 §1) ------------


def site_payloads(site: Path, track: str) -> list[dict[str, Any]]:
    """Each item payload of ``track`` in a site the view wrote (the JSON before the packed
    texts: verdicts are plain strings in it)."""
    out = []
    for path in sorted((site / "data/items").glob("*.js")):
        text = path.read_text(encoding="ascii")
        head = text[len("RIMO.item("):]
        _, end = json.JSONDecoder().raw_decode(head)  # the item's number
        payload, _ = json.JSONDecoder().raw_decode(head[end + 1:])
        if payload["track"] == track:
            out.append(payload)
    return out


def test_the_view_of_a_judged_experiment_shows_every_verdict(repo: Path, tmp_path: Path
                                                             ) -> None:
    """The judge's verdicts reach the site of a run judged by the real judge stage. The view
    used to read judge.json's top-level "enabled", which the numbers-only layout keeps under
    run[0], so every RIMO-P part had "judge": null."""
    from rimo_eval.artifacts.paths import JUDGE_TABLE
    from rimo_eval.run.reader import RunReader

    with RunReader(repo) as reader:  # the table itself, whatever judge.json says
        table = reader.open(JUDGED).table(JUDGE_TABLE)
    assert len(table)
    want = {(str(r.problem_id), int(r.sample), int(r.part)): str(r.verdict)
            for r in table.itertuples()}
    site = tmp_path / "site"
    sh(repo, "rimo-eval", "view", JUDGED, "--out", str(site))
    shown = {}
    for payload in site_payloads(site, "RIMO-P"):
        for sample in payload["runs"][0] or []:
            for i, part in enumerate(sample["parts"]):
                if part["judge"] is not None:
                    shown[(payload["id"], sample["s"], i + 1)] = part["judge"]["verdict"]
    assert shown == want


def test_every_tool_names_the_model_as_model_json(repo: Path, tmp_path: Path) -> None:
    """oracle (the workspace, a full `dvc repro`: its report too) and constant (an
    experiment): summary, report, view and leaderboard show reports/model.json's string."""
    oracle = json.loads((repo / "reports/model.json").read_text(encoding="utf-8"))["model"]
    constant = json.loads(sh(repo, "git", "show",
                             f"{exp_commit(repo, CONSTANT)}:reports/model.json").stdout)["model"]
    assert (oracle, constant) == ("oracle", "constant '0'")
    assert f", model {oracle}\n" in sh(repo, "rimo-eval", "summary").stdout
    report = (repo / "reports/report.html").read_text(encoding="utf-8")
    assert (f'<th style="text-align: left">model</th><td style="text-align: left">{oracle}'
            f"</td>") in report
    board = json.loads(sh(repo, "rimo-eval", "leaderboard", "main", CONSTANT, "--label",
                          "model", "--json", "--out", str(tmp_path / "lb")).stdout)
    assert sorted(r["model"] for r in board["runs"]) == sorted([oracle, constant])
    site = tmp_path / "site"
    sh(repo, "rimo-eval", "view", "workspace", CONSTANT, "--out", str(site))
    index = json.loads((site / "data/index.js").read_text()[len("RIMO.index("):-3])
    assert [r["model"] for r in index["runs"]] == [oracle, constant]
