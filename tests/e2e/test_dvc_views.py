"""DVC's own views of two replay experiments, in a 120-column terminal: `dvc exp show` with the
README's flags, `dvc metrics diff`, and the `rimo-eval summary` that `make repro` ends with.

Everything runs through the real DVC CLI in a throwaway repo; the terminal is a real pty of 120
columns, so rich lays the table out as it would for a user.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import pty
import re
import select
import shlex
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rimo_eval.artifacts.paths import PLOTS_DIR, YEAR_PLOT_FILES, plot_path
from rimo_eval.commands.compare.command import compare
from rimo_eval.commands.summary import EXP_SHOW_VIEW
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from rimo_eval.run.reader import RunReader
from tests.support.browser import chromium
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import BIN, env, sh
from tests.support.validated_repo import validated_copy

pytestmark = pytest.mark.slow

WIDTH = 120
# The view `rimo-eval summary` and the README recommend.
EXP_SHOW = shlex.split(EXP_SHOW_VIEW)
COLUMNS = (f"{TRACK_N}.accuracy", f"{TRACK_P}.prefix_score", "model", "predict.limit")
EXPS = {"exp-a": 20, "exp-b": 40}  # name: predict.limit
SKILL = {"exp-a": 4, "exp-b": 7}  # of 10: the share of items its replay gets right
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def write_replay(repo: Path, path: Path, skill: int) -> None:
    """A replay that gets about skill/10 of the items right (seeded by the id), and a varying
    prefix of each RIMO-P item's parts, so the charts have real heights to show."""
    lines = []
    for track in (TRACK_N, TRACK_P):
        items = pd.read_parquet(repo / f"data/items/{track.lower().replace('-', '_')}.parquet")
        for row in items.itertuples():
            h = hashlib.sha256(row.problem_id.encode()).digest()
            right = h[0] % 10 < skill
            if track == TRACK_N:
                pred: Any = row.answer if right else "-1"
            else:
                parts = list(row.sub_solutions)
                keep = len(parts) if right else h[1] % len(parts)
                pred = parts[:keep] + ["no"] * (len(parts) - keep)
            lines.append(json.dumps({"track": track, "problem_id": row.problem_id,
                                     "prediction": pred}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, validated_base: Path) -> Path:
    repo = validated_copy(validated_base, tmp_path_factory.mktemp("views") / "repo",
                          predict={"backend": "replay", "limit": None,
                                   "replay": {"path": "runs/exp-a.jsonl"}})
    for name, skill in SKILL.items():
        write_replay(repo, repo / f"runs/{name}.jsonl", skill)
    sh(repo, "dvc", "repro", "score")
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", "baseline")
    for name, limit in EXPS.items():
        sh(repo, "dvc", "exp", "run", "-n", name, "score", "-S", f"predict.limit={limit}",
           "-S", f"predict.replay.path=runs/{name}.jsonl")
    return repo


def in_terminal(repo: Path, args: list[str], columns: int = WIDTH) -> list[str]:
    """``args`` with its stdout on a pty of ``columns`` columns; the lines, escapes removed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    # A pager would wait for a key press: none, whatever the command's own flags.
    proc = subprocess.Popen(args, cwd=repo, env={**env(), "COLUMNS": str(columns),
                                                 "DVC_PAGER": "cat"},
                            stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode() if proc.stderr else ""
    text = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r", "")
    return [line for line in text.split("\n") if line.strip()]


def with_pager(repo: Path, args: list[str], columns: int = WIDTH, rows: int = 40
               ) -> tuple[list[str], bool]:
    """``args`` in a real ``rows`` x ``columns`` terminal as a user has it: stdin, stdout and
    stderr on the pty, DVC's default pager (less) on. Returns the screen's lines (escapes
    removed) and whether less had to be told to quit (it quits by itself when the output fits
    one screen)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    drop = ("DVC_PAGER", "PAGER", "LESS", "COLUMNS", "LINES")
    proc = subprocess.Popen(args, cwd=repo, env={**{k: v for k, v in env().items()
                                                    if k not in drop}, "TERM": "xterm"},
                            stdin=follower, stdout=follower, stderr=follower,
                            start_new_session=True)
    os.close(follower)
    chunks: list[bytes] = []
    quit_sent, deadline = False, time.monotonic() + 300
    last_output = time.monotonic()
    while time.monotonic() < deadline:
        if select.select([leader], [], [], 1.0)[0]:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
            last_output = time.monotonic()
        elif proc.poll() is not None:
            break
        elif chunks and not quit_sent and (
                pager_prompt(chunks) or time.monotonic() - last_output > 20):
            # The pager waits on a full screen: leave it. Only once its prompt is up (or after
            # a long silence): a busy machine may pause DVC mid-output, and a "q" sent then
            # would be taken for a pager that had to be told to quit.
            os.write(leader, b"q")
            quit_sent = True
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    raw = b"".join(chunks).decode("utf-8", "replace")
    # less marks a line it cut at the screen's edge with a reverse-video ">".
    text = raw.replace("\x1b[7m>\x1b[27m", "\u2192")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]", "", text).replace("\r", "")
    assert "\x1b[?1h" in raw or quit_sent, "the pager did not run"
    return [line for line in text.split("\n") if line.strip()], quit_sent


def pager_prompt(chunks: list[bytes]) -> bool:
    """Whether less is showing its prompt (":" or "(END)") and waiting for a key."""
    tail = b"".join(chunks)[-200:].decode("utf-8", "replace")
    tail = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]", "", tail).rstrip()
    return tail.endswith((":", "(END)"))


def check_table(lines: list[str]) -> None:
    assert lines and all(len(line) <= WIDTH for line in lines), [len(x) for x in lines]
    header = next(line for line in lines if "Experiment" in line)
    for column in COLUMNS:
        assert column in header, header
    assert "…" not in "\n".join(lines)  # no column was collapsed away
    assert "\u2192" not in "\n".join(lines)  # nor cut off by the pager
    for name, limit in EXPS.items():
        # Issue 29 §5: each experiment's sample size and its replay file, not just "replay".
        row = next(line for line in lines if f"[{name}]" in line)
        assert f"replay runs/{name}.jsonl" in row and re.search(rf"\s{limit}\s*$", row), row


def test_readme_and_summary_recommend_the_tested_view() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert EXP_SHOW_VIEW in readme


def test_exp_show_fits_120_by_40_with_the_pager_on(repo: Path) -> None:
    lines, waited = with_pager(repo, EXP_SHOW)
    check_table(lines)
    assert not waited  # one screen: less showed it and quit, as for a user
    # The same terminal, plain `dvc exp show`: the pager cuts the RIMO-P columns off, the
    # problem the view above solves (so this test can tell the two apart).
    plain, _ = with_pager(repo, ["dvc", "exp", "show"])
    header = next(line for line in plain if "Experiment" in line)
    assert header.endswith("\u2192") and f"{TRACK_P}.prefix_score" not in header


def test_exp_show_fits_120_columns_in_a_terminal(repo: Path) -> None:
    check_table(in_terminal(repo, [*EXP_SHOW, "--no-pager"]))


def test_exp_show_fits_120_columns_when_piped(repo: Path) -> None:
    # Piped, rich does not shrink anything: the view itself must be narrow enough.
    check_table([ln for ln in sh(repo, *EXP_SHOW).stdout.split("\n") if ln.strip()])


def test_exp_show_columns_lead_with_the_headline(repo: Path) -> None:
    """Unfiltered, the metric columns are metrics.json's own keys in file order: the headline
    first, no breakdown, no provenance hash, no run facts."""
    rows = json.loads(sh(repo, "dvc", "exp", "show", "--json").stdout)
    workspace = next(r for r in rows if r["rev"] == "workspace")
    files = workspace["data"]["metrics"]
    # metrics.json leads; then the run's model (one string) and the opt-in judge's own.
    assert list(files) == ["reports/metrics.json", "reports/model.json", "reports/judge.json"]
    assert files["reports/model.json"]["data"] == {"model": "replay runs/exp-b.jsonl"}
    data = files["reports/metrics.json"]["data"]
    assert list(data[TRACK_N])[:3] == ["accuracy", "accuracy_ci_low", "accuracy_ci_high"]
    assert list(data[TRACK_P])[:3] == ["prefix_score", "strict", "sub_problem_accuracy"]
    assert "provenance" not in data and "by_domain" not in json.dumps(data)


def _numbers(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_metrics_diff_between_two_experiments_lists_numbers_and_the_model(repo: Path) -> None:
    diff = json.loads(sh(repo, "dvc", "metrics", "diff", "exp-a", "exp-b", "--json").stdout)
    # DVC does not promise an order across files here (CI listed model.json first).
    assert sorted(diff) == ["reports/metrics.json", "reports/model.json"]
    # The one string: which model each side ran.
    assert diff["reports/model.json"] == {"model": {"old": "replay runs/exp-a.jsonl",
                                                    "new": "replay runs/exp-b.jsonl"}}
    changed = diff["reports/metrics.json"]
    assert f"{TRACK_N}.n" in changed and f"{TRACK_P}.n" in changed
    assert changed[f"{TRACK_N}.n"] == {"old": 20, "new": 40, "diff": 20}
    for key, entry in changed.items():
        assert _numbers(entry["old"]) and _numbers(entry["new"]) and "diff" in entry, key
    assert not any("provenance" in k or "by_" in k for k in changed)
    # The table form, as a user reads it: one row per metric; the model row where it changed.
    table = in_terminal(repo, ["dvc", "metrics", "diff", "exp-a", "exp-b"])
    assert any(f"{TRACK_N}.n" in line for line in table)
    assert any("replay runs/exp-a.jsonl" in line for line in table)
    # A model name widens the value columns; the numbers alone fit the terminal (README).
    numbers = in_terminal(repo, ["dvc", "metrics", "diff", "exp-a", "exp-b", "--targets",
                                 "reports/metrics.json"])
    assert all(len(line) <= WIDTH for line in numbers)
    assert any(f"{TRACK_N}.n" in line for line in numbers)
    assert not any("model" in line for line in numbers)


def summary_lines(repo: Path) -> list[str]:
    out = sh(repo, str(BIN / "rimo-eval"), "summary").stdout
    lines = out.rstrip("\n").split("\n")
    assert len(lines) <= 15 and all(len(line) <= WIDTH for line in lines), lines
    return lines


def test_summary_is_short_and_names_run_backend_and_report(repo: Path) -> None:
    # The workspace holds the last experiment run: exp-b, a sample.
    lines = summary_lines(repo)
    metrics = json.loads((repo / "reports/metrics.json").read_text(encoding="utf-8"))
    n, p = metrics[TRACK_N], metrics[TRACK_P]
    # First the headline beside its floor (issue 45 §5), from the run's own breakdown.json.
    floor = json.loads((repo / "reports/breakdown.json").read_text(encoding="utf-8"))[
        TRACK_N]["baselines"]["best_constant"]
    assert lines[0] == (f"RIMO-N {100 * n['accuracy']:.1f}% (a constant \"{floor['answer']}\" "
                        f"scores {100 * floor['accuracy']:.1f}% on these items)")
    assert lines[1] == ("run: SAMPLE of 40/335 RIMO-N, 40/456 RIMO-P items (predict.limit 40, "
                        "seed 0)")
    assert lines[2] == "  the full run: dvc exp run --temp -S predict.limit=null"
    assert lines[3].startswith("backend: replay (fingerprint ")
    acc = next(line for line in lines if "RIMO-N accuracy" in line)
    assert f"{100 * n['accuracy']:.1f}%" in acc
    assert f"95% [{100 * n['accuracy_ci_low']:.1f}%, {100 * n['accuracy_ci_high']:.1f}%]" in acc
    prefix = next(line for line in lines if "RIMO-P prefix score" in line)
    assert (f"95% [{100 * p['prefix_score_ci_low']:.1f}%, "
            f"{100 * p['prefix_score_ci_high']:.1f}%]") in prefix
    assert any(line.startswith("report: reports/report.html") for line in lines)
    assert any(f"{TRACK_P}: {p['n']} gradable, {p['ungradable']} ungradable" in line
               for line in lines)
    # The baseline commit is a full run, and says so.
    sh(repo, "git", "checkout", "--", ".")
    sh(repo, "dvc", "checkout", "predict", "score")  # the report stage never ran here
    full = json.loads((repo / "reports/metrics.json").read_text(encoding="utf-8"))
    assert summary_lines(repo)[1] == (f"run: full benchmark, {full[TRACK_N]['n']}/335 RIMO-N, "
                                      f"456/456 RIMO-P items")


def test_summary_without_metrics_names_the_file(tmp_path: Path) -> None:
    proc = sh(tmp_path, str(BIN / "rimo-eval"), "summary", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert ("reports/metrics.json: not found: `make repro` (or `dvc repro`) runs the pipeline "
            "here") in proc.stderr


# Per chart: its title, the x-axis labels, the legend entries and the marks vega drew.
CHARTS = """
return [...document.querySelectorAll('svg.marks')].map(svg => ({
  title: [...svg.querySelectorAll('.role-title-text')].map(t => t.textContent),
  labels: [...svg.querySelectorAll('.role-axis-label text')].map(t => t.textContent),
  legend: [...svg.querySelectorAll('.role-legend-label text')].map(t => t.textContent),
  bars: [...svg.querySelectorAll('g.layer_0_marks path')].map(
    p => [p.getAttribute('aria-label'), p.getAttribute('d')]),
  rules: svg.querySelectorAll('g.mark-rule.role-mark line').length,
}));
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(1200, 1500, console_log=True) as driver:
        yield driver


def test_plots_diff_draws_every_experiment_with_intervals_offline(
        repo: Path, browser: Any, tmp_path: Path) -> None:
    """`dvc plots diff` through the project's page (Vega inlined from node_modules): in
    Chromium with no network, all four charts (domains, parts, and the two tracks by
    competition year) draw a bar and an error bar per experiment and category, categories on
    x, every experiment in the legend."""
    from selenium.webdriver.support.ui import WebDriverWait

    modules = REPO_ROOT / "node_modules"
    assert (modules / "vega").is_dir(), "run `npm ci` (make setup) first"
    sh(repo, str(BIN / "python"), "-m", "rimo_eval.commands.plots_page", "--node-modules",
       str(modules))
    out = tmp_path / "plots"
    sh(repo, "dvc", "plots", "diff", "exp-a", "exp-b", "-o", str(out))
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "cdn.jsdelivr" not in page and "<script src" not in page
    browser.get((out / "index.html").as_uri())
    WebDriverWait(browser, 60).until(lambda d: len(d.execute_script(CHARTS)) == 4)
    charts = browser.execute_script(CHARTS)
    by_title = {" ".join(c["title"]): c for c in charts}
    years = PLOTS_DIR / YEAR_PLOT_FILES[TRACK_N], PLOTS_DIR / YEAR_PLOT_FILES[TRACK_P]
    for title, (plot, x, y) in (
            ("RIMO-N accuracy by domain", (plot_path(TRACK_N), "domain", "accuracy")),
            ("RIMO-P prefix score", (plot_path(TRACK_P), "number of parts", "prefix score")),
            ("RIMO-N accuracy by competition year", (years[0], "competition year", "accuracy")),
            ("RIMO-P strict by competition year", (years[1], "competition year", "strict"))):
        chart = next(c for t, c in by_title.items() if t.startswith(title))
        want = {}  # (experiment, category) -> value, from each experiment's own plot file
        for name in EXPS:
            with RunReader(repo) as reader:
                csv = pd.read_csv(io.BytesIO(reader.open(name).files.read_bytes(plot)))
            for row in csv.itertuples(index=False):
                want[(name, str(row[0]))] = float(row[1])
        drawn = {}
        for label, path in chart["bars"]:
            fields = dict(part.split(": ", 1) for part in label.split("; "))
            height = float(re.search(r"v(-?[\d.]+)", path).group(1))  # pixels of 260
            drawn[(fields["rev"], fields[x])] = (float(fields[y]), height / 260)
        assert set(drawn) == set(want), (sorted(drawn), sorted(want))  # every bar, no other
        for key, (value, height) in drawn.items():
            assert value == pytest.approx(want[key], abs=1e-6), key
            assert height == pytest.approx(value, abs=0.01), key  # drawn to its value
        categories = {c for _, c in want}
        assert categories <= set(chart["labels"]), chart["labels"]  # on the x axis, nominal
        assert set(chart["legend"]) == set(EXPS), chart["legend"]
        assert chart["rules"] == len(want), chart["rules"]  # an error bar per bar
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    # To look at it: RIMO_EVAL_SCREENSHOT=/some/file.png pytest -k plots_diff
    shot = Path(os.environ.get("RIMO_EVAL_SCREENSHOT") or tmp_path / "plots.png")
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_compare_two_experiments_shows_params_diff_flips_and_chart(
        repo: Path, browser: Any, tmp_path: Path) -> None:
    """`rimo-eval compare` on the two experiments: their params diff read at each experiment's
    commit, flips with gold and both predictions (RIMO-P's from the cached predictions), capped,
    and the HTML's chart drawn in Chromium."""
    page = tmp_path / "compare.html"
    md = sh(repo, str(BIN / "rimo-eval"), "compare", "exp-a", "exp-b", "--flips", "3",
            "--html", str(page)).stdout
    assert "| predict.limit | 20 | 40 |" in md
    assert "| predict.replay.path | runs/exp-a.jsonl | runs/exp-b.jsonl |" in md
    # Every flip (what --json prints), in-process: the CLI run above is the command's test.
    full = json.loads(json.dumps(compare(repo, "exp-a", "exp-b")))
    for track in (TRACK_N, TRACK_P):
        flips = full["tracks"][track]["flips"]
        assert len(flips) > 3 and f"(first 3 of {len(flips)} by problem_id" in md
        listed = [line for line in md.splitlines() if line.startswith(
            tuple(f"| {f['problem_id']} |" for f in flips))]
        assert len([x for x in listed if (" ✓" in x) == (track == TRACK_P)]) == 3
    p_flip = full["tracks"][TRACK_P]["flips"][0]
    assert p_flip["gold"] and p_flip["part"] >= 1 and "prediction_b" in p_flip
    browser.get(page.as_uri())
    size = browser.execute_script(
        "const i = document.querySelector('figure img');"
        "return i && i.complete ? [i.naturalWidth, i.naturalHeight] : null;")
    assert size and size[0] > 300 and size[1] > 100, size
    rows = browser.execute_script(
        "return [...document.querySelectorAll('table')].map(t => t.rows.length)")
    assert len(rows) >= 6  # sides, metrics, tests, counts, params, flips per track


def test_summary_after_a_failed_exp_run_points_at_checkout_and_apply(repo: Path) -> None:
    """A failed `dvc exp run` removes the outputs of the stage that failed; with no remote the
    way back is `dvc checkout` or `dvc exp apply`, not `dvc pull`. Follow the hint."""
    failed = sh(repo, "dvc", "exp", "run", "score", "-S", "predict.replay.path=absent.jsonl",
                check=False)
    assert failed.returncode != 0
    lines = summary_lines(repo)
    hint = next(line for line in lines if "dvc checkout" in line)
    # The tables are in this clone's DVC cache: `dvc checkout` is the way back (the reader's
    # advice; `dvc exp apply` where they are not), never `dvc pull` with no remote.
    assert "`dvc checkout` restores them from this clone's DVC cache" in hint
    assert "dvc pull" not in "\n".join(lines)
    # Follow it (this repo ran only up to score, so only those stages have outputs to restore).
    sh(repo, "git", "checkout", "--", "params.yaml", "reports")
    sh(repo, "dvc", "checkout", "predict", "score")
    lines = summary_lines(repo)
    assert lines[2].startswith("backend: replay (fingerprint ") and "full benchmark" in lines[1]
