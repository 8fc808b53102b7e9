"""A newcomer's first session (issue 43): the README's no-key quick start, command by command,
in a fresh copy of the project, with the real DVC and CLI.

The oracle experiment sets ``predict.limit=null``; the README says the next ones run the
default sample (5 items per track, k = 1) with their own backend, because ``--temp`` leaves
params.yaml as committed. Each experiment's predict record is checked against that, the
workspace's params.yaml stays the committed bytes, and the tools write nothing git would list.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import make_repo, sh

pytestmark = pytest.mark.slow

QUICK_START = "## No key, no server: try every tool"
# What the README's text says each experiment runs: items per track, k, backend.
EXPECTED = {"oracle": (335, 456, 1, "oracle"), "const": (5, 5, 1, "constant"),
            "replay": (5, 5, 1, "replay")}


def readme_commands() -> list[str]:
    """The quick start's bash block, one command a line (comments and `source` left out)."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split(QUICK_START)[1].split("```bash\n")[1].split("```")[0]
    commands = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [c for c in commands if c and not c.startswith(("#", "source "))]


def experiment_file(repo: Path, name: str, path: str) -> str:
    refs = sh(repo, "git", "for-each-ref", "--format=%(refname)", "refs/exps").stdout.split()
    ref = next(r for r in refs if r.endswith(f"/{name}"))
    return sh(repo, "git", "show", f"{ref}:{path}").stdout


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory, mirror_dir: Path
            ) -> tuple[Path, dict[str, str], bytes]:
    """The fresh copy (the project's own params: backend local, limit 5), each README command's
    output, and the committed params.yaml."""
    repo = make_repo(tmp_path_factory.mktemp("newcomer") / "repo", mirror_dir,
                     predict={"backend": "local"})
    committed = (repo / "params.yaml").read_bytes()
    outputs = {}
    for command in readme_commands():
        proc = sh(repo, "bash", "-c", command, timeout=1200)
        outputs[command] = proc.stdout + proc.stderr
        assert (repo / "params.yaml").read_bytes() == committed, command
    return repo, outputs, committed


def test_the_quick_start_is_the_three_no_key_backends_and_the_tools() -> None:
    commands = readme_commands()
    runs = [c for c in commands if c.startswith("dvc exp run")]
    assert [shlex.split(c)[shlex.split(c).index("-n") + 1] for c in runs] == list(EXPECTED)
    assert all("--temp" in shlex.split(c) for c in runs)
    assert "-S predict.limit=null" in runs[0]
    assert "-S 'predict.constant.answer=\"2\"'" in runs[1]
    tools = {shlex.split(c)[1] for c in commands if c.startswith("rimo-eval")}
    assert tools == {"audit", "compare", "view", "leaderboard"}


def test_each_experiment_runs_what_the_readme_says(
        session: tuple[Path, dict[str, str], bytes]) -> None:
    repo, outputs, _ = session
    for name, (n, p, k, backend) in EXPECTED.items():
        record = json.loads(experiment_file(repo, name, "reports/predict_run.json"))
        assert (record["RIMO-N"]["items"], record["RIMO-P"]["items"], record["samples"],
                record["backend"]) == (n, p, k, backend), name
        command = next(c for c in outputs if c.startswith("dvc exp run") and f"-n {name} " in c)
        first = (f"predict: {n + p} items ({n}/335 RIMO-N, {p}/456 RIMO-P), k = {k}, "
                 f"backend {backend} (fingerprint ")
        assert first in outputs[command], outputs[command][-3000:]
    # The README quotes the constant run's first line.
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"`(predict: 10 items \(5/335 RIMO-N,\s+5/456 RIMO-P\), k = 1, backend "
                       r"constant)`", readme)
    assert quoted is not None
    const = next(c for c in outputs if "-n const " in c)
    assert " ".join(quoted[1].split()) in outputs[const]
    answer = experiment_file(repo, "const", "params.yaml")
    assert yaml.safe_load(answer)["predict"]["constant"]["answer"] == "2"


def test_the_oracle_scores_every_item_and_says_lenient_match_is_no_flag(
        session: tuple[Path, dict[str, str], bytes]) -> None:
    repo, outputs, _ = session
    metrics = json.loads(experiment_file(repo, "oracle", "reports/metrics.json"))
    assert metrics["RIMO-N"]["accuracy"] == metrics["RIMO-P"]["strict"] == 1.0
    oracle = next(c for c in outputs if "-n oracle " in c)
    assert ("RIMO-N lenient accuracy 1.0 (335 of 335 replies right after MathArena-style "
            "normalisation, a measure of agreement, not a flag); flagged replies: none"
            ) in outputs[oracle]
    # Under --temp the run's own -S is what differs from HEAD, and the warning says so.
    assert ("predict: warning: not the committed params.yaml (HEAD): predict.backend oracle "
            "(HEAD: local); predict.limit null (HEAD: 5): set by this experiment's -S"
            ) in outputs[oracle]
    audit = next(c for c in outputs if c.startswith("rimo-eval audit"))
    assert "Traceback" not in outputs[audit]


def test_the_tools_print_no_html_entities_and_leave_a_clean_tree(
        session: tuple[Path, dict[str, str], bytes]) -> None:
    repo, outputs, _ = session
    for command, out in outputs.items():
        if command.startswith("rimo-eval"):
            assert "&lt;" not in out and "&gt;" not in out and "&amp;" not in out, command
    assert sh(repo, "git", "status", "--porcelain").stdout == ""


def test_a_failed_temp_experiment_leaves_params_yaml_alone(
        session: tuple[Path, dict[str, str], bytes]) -> None:
    """docs/dvc.md: under --temp a failed run's key stays in DVC's copy, and its error says so."""
    repo, _, committed = session
    proc = sh(repo, "dvc", "exp", "run", "--temp", "-S", "+predict.limt=3", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert ("predict.limt is not in the committed params.yaml (HEAD): this experiment's -S "
            "set it (the workspace's file is untouched)") in out
    assert (repo / "params.yaml").read_bytes() == committed


def test_a_value_left_in_params_yaml_is_named_before_it_runs(
        session: tuple[Path, dict[str, str], bytes]) -> None:
    """What the README warns of: a plain `dvc exp run -S predict.limit=null` leaves the value in
    params.yaml; the next estimate and predict say 791 items and that it is not HEAD's."""
    repo, _, committed = session
    params = yaml.safe_load(committed)
    params["predict"].update(backend="oracle", limit=None)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    try:
        sh(repo, "dvc", "repro", "validate")
        out = sh(repo, "rimo-eval", "predict", "--estimate").stdout.splitlines()
    finally:
        (repo / "params.yaml").write_bytes(committed)
    assert out[0] == ("predict --estimate: 791 items (335/335 RIMO-N, 456/456 RIMO-P), k = 1, "
                      "backend oracle")
    assert out[1].startswith("predict --estimate: warning: not the committed params.yaml "
                             "(HEAD): predict.backend oracle (HEAD: local); predict.limit null "
                             "(HEAD: 5): this run's -S, or left in params.yaml by an earlier "
                             "`dvc exp run -S` or `dvc exp apply` (`git checkout params.yaml` "
                             "restores the committed values)")
