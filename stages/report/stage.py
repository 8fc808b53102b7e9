"""Stage report: execute ``notebooks/report.ipynb`` with papermill and export it to HTML.

Both outputs are byte-stable: papermill's and nbclient's timings, versions and paths are stripped,
charts are PNGs without a software tag, and the papermill-injected cell gets a fixed id, so a rerun
with unchanged inputs reproduces ``reports/report.ipynb`` and ``reports/report.html`` exactly.

The small helpers below are what the notebook calls; keeping them here keeps its cells short and
lets them be unit-tested without a kernel.
"""

from __future__ import annotations

import html
import io
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from stages.core import artifacts as A
from stages.core.artifacts import NOTEBOOK
from stages.core.artifacts import REPORT_HTML as OUT_HTML
from stages.core.artifacts import REPORT_IPYNB as OUT_IPYNB
from stages.core.atomic import write_text
from stages.core.config import section
from stages.core.errors import StageError
from stages.core.hashing import canonical_json, sha256_file
from stages.core.tracks import TRACK_N, TRACK_P

# Notebook parameter -> (default path, the stage that produces it: named in the error message).
INPUTS: dict[str, tuple[Path, str]] = {
    "items_n_path": (A.items_path(TRACK_N), "validate"),
    "items_p_path": (A.items_path(TRACK_P), "validate"),
    "predictions_n_path": (A.predictions_path(TRACK_N), "predict"),
    "predictions_p_path": (A.predictions_path(TRACK_P), "predict"),
    "scores_n_path": (A.scores_path(TRACK_N), "score"),
    "scores_p_path": (A.scores_path(TRACK_P), "score"),
    "metrics_path": (A.METRICS_PATH, "score"),
    "validation_path": (A.VALIDATION_PATH, "validate"),
    "judge_path": (A.JUDGE_METRICS_PATH, "judge"),
    "judge_calibration_path": (A.JUDGE_CALIBRATION_PATH, "judge --calibrate"),
    "judge_table_path": (A.JUDGE_TABLE, "judge"),
    "params_path": (A.PARAMS_PATH, ""),
}

CELL_TIMEOUT_S = 600  # a report cell takes seconds; a hang should fail the stage, not block it
MAX_TEXT = 2000  # characters of model text shown per failure; the full text is in the predictions
MAX_FINDINGS = 200  # rows of the findings table; the rest are counted, not listed

# Papermill/nbclient metadata that changes on every run (or with the machine) but not with inputs.
_VOLATILE_NB_PAPERMILL = ("start_time", "end_time", "duration", "environment_variables",
                          "version", "input_path", "output_path")
_VOLATILE_CELL_PAPERMILL = ("start_time", "end_time", "duration")
_INJECTED_TAG = "injected-parameters"

# MathJax (loaded by nbconvert's template) must not interpret model text: it skips <pre> and
# these classes (MathJax 2 and 3 names).
_NO_MATH = "tex2jax_ignore mathjax_ignore"
TABLE_CSS = """<style>
table.rimo { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
table.rimo th, table.rimo td { border: 1px solid #ccc; padding: 4px 8px; text-align: left;
  vertical-align: top; }
table.rimo th { background: #f3f3f3; }
table.rimo pre { white-space: pre-wrap; word-break: break-word; max-width: 70em; margin: 0; }
div.rimo-banner { border: 2px solid #c60; background: #fff3e0; padding: 0.8em 1em;
  font-weight: bold; margin: 0.5em 0; }
</style>"""


# --- small formatting helpers --------------------------------------------------------------------

def read_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise StageError(f"{path}: expected a JSON object")
    return data


def _absent(value: Any) -> bool:
    """None, or the NaN that pandas puts in a null cell of a Parquet column."""
    return value is None or (isinstance(value, float) and value != value)


def pct(value: Any) -> str:
    """A rate as a percentage with one decimal ("57.1%"); a dash when absent."""
    if _absent(value):
        return "—"
    return f"{float(value):.1%}"


def _ci(ci: Mapping[str, Any] | None, key: str) -> str:
    bounds = (ci or {}).get(key) or {}
    if bounds.get("low") is None or bounds.get("high") is None:
        return "—"
    return f"[{pct(bounds['low'])}, {pct(bounds['high'])}]"


def _cell(value: Any, pre: bool) -> str:
    if _absent(value):
        text = ""
    elif isinstance(value, float):
        text = f"{value:.3f}"
    else:
        text = str(value)
    text = html.escape(text)  # every cell: model and upstream text are untrusted
    return f"<td><pre>{text}</pre></td>" if pre and text else f"<td>{text}</td>"


def html_table(frame: pd.DataFrame, pre: Sequence[str] = (), caption: str | None = None,
               empty: str = "None.") -> str:
    """An HTML table with every header and cell escaped; ``pre`` columns keep their line breaks.

    Built by hand (not Styler, whose ids are random) so the output is byte-stable.
    """
    if frame.empty:
        return f"<p><em>{html.escape(empty)}</em></p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join(
        "<tr>" + "".join(_cell(v, c in pre) for c, v in zip(frame.columns, row, strict=True))
        + "</tr>"
        for row in frame.itertuples(index=False, name=None)
    )
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (f'<table class="rimo {_NO_MATH}">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def _truncate(text: str | None, limit: int = MAX_TEXT) -> str:
    if not text:
        return ""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… ({len(text) - limit} more characters)"


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts as (dotted key, JSON scalar) rows, sorted: readable and order-stable."""
    if isinstance(value, Mapping):
        rows: list[tuple[str, str]] = []
        for key in sorted(value, key=str):
            rows += _flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
        return rows
    return [(prefix, value if isinstance(value, str) else canonical_json(value))]


# --- sections ------------------------------------------------------------------------------------

def sample_banner(metrics: Mapping[str, Any], limit: Any = None) -> str:
    """An HTML warning when only a sample was evaluated; empty for a full run.

    ``limit`` (``predict.limit``) is used when metrics.json does not record it itself.
    """
    sample = metrics.get("sample") or {}
    if not sample.get("is_sample"):
        return ""
    evaluated, total = sample.get("evaluated") or {}, sample.get("total") or {}
    parts = [f"{evaluated.get(t, '?')} of {total.get(t, '?')} {t}" for t in (TRACK_N, TRACK_P)]
    limit = sample.get("limit", limit)
    how = f" (predict.limit = {limit})" if limit is not None else ""
    return (f'<div class="rimo-banner">SAMPLE RUN: only {html.escape(" and ".join(parts))} '
            f"items were evaluated{html.escape(how)}. These numbers are not comparable with "
            "full-benchmark results.</div>")


def headline_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """One row per headline metric with its 95% interval and the item count behind it."""
    n, p = metrics.get(TRACK_N) or {}, metrics.get(TRACK_P) or {}
    rows = [
        (TRACK_N, "accuracy", pct(n.get("accuracy")), _ci(n.get("ci"), "accuracy"),
         f"{n.get('correct', '—')} / {n.get('n', '—')} items"),
        (TRACK_P, "strict (all parts right)", pct(p.get("strict")), _ci(p.get("ci"), "strict"),
         f"{p.get('n', '—')} items"),
        (TRACK_P, "sub-problem accuracy", pct(p.get("sub_problem_accuracy")),
         _ci(p.get("ci"), "sub_problem_accuracy"), f"{p.get('sub_problems', '—')} sub-problems"),
        (TRACK_P, "prefix score", pct(p.get("prefix_score")), _ci(p.get("ci"), "prefix_score"),
         f"{p.get('n', '—')} items"),
    ]
    return pd.DataFrame(rows, columns=["Track", "Metric", "Value", "95% interval", "Based on"])


def counts_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """Missing/error/ungradable counts: what the headline numbers count as wrong or leave out."""
    n, p = metrics.get(TRACK_N) or {}, metrics.get(TRACK_P) or {}
    rows = [(TRACK_N, n.get("n"), n.get("missing"), n.get("errors"), "—"),
            (TRACK_P, p.get("n"), p.get("missing"), p.get("errors"), p.get("ungradable"))]
    return pd.DataFrame(rows, columns=["Track", "Items", "Missing (wrong)", "Errors (wrong)",
                                       "Ungradable"], dtype=object)


def parts_table(metrics: Mapping[str, Any]) -> pd.DataFrame:
    """The numbers behind the RIMO-P chart, one row per number of parts."""
    by_parts = (metrics.get(TRACK_P) or {}).get("by_parts") or {}
    rows = [(k, v.get("n"), pct(v.get("strict")), pct(v.get("sub_problem_accuracy")),
             pct(v.get("prefix_score"))) for k, v in _sorted_parts(by_parts)]
    return pd.DataFrame(rows, columns=["Parts", "Items", "Strict", "Sub-problem accuracy",
                                       "Prefix score"], dtype=object)


def _sorted_parts(by_parts: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    keys = sorted(by_parts, key=lambda k: (int(k) if str(k).isdigit() else 10**9, str(k)))
    return [(str(k), by_parts[k] or {}) for k in keys]


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    # No "Software" tag: the PNG then depends only on the pixels, not the matplotlib version.
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _figure(title: str, top: float = 1.12) -> tuple[Any, Any]:
    # A bare Figure (not pyplot): not registered with the inline backend, so not shown twice.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_ylim(0, top)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("rate")
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:.0%}")
    return fig, ax


def domain_chart(metrics: Mapping[str, Any]) -> bytes:
    """RIMO-N accuracy per domain as a PNG, each bar labelled with its rate and item count."""
    import matplotlib.style

    n = metrics.get(TRACK_N) or {}
    acc, counts = n.get("by_domain") or {}, n.get("by_domain_n") or {}
    domains = sorted(acc)
    with matplotlib.style.context("default"):  # ignore any local matplotlibrc
        fig, ax = _figure(f"{TRACK_N}: accuracy by domain")
        if domains:
            values = [float(acc[d] or 0.0) for d in domains]
            bars = ax.bar(domains, values, color="#4878a8")
            ax.bar_label(bars, labels=[f"{v:.0%} (n={counts.get(d, '?')})"
                                       for d, v in zip(domains, values, strict=True)])
        else:
            ax.text(0.5, 0.5, "no items", ha="center", transform=ax.transAxes)
        return _png(fig)


def parts_chart(metrics: Mapping[str, Any]) -> bytes:
    """RIMO-P strict / sub-problem accuracy / prefix score per number of parts, as a PNG."""
    import matplotlib.style

    parts = _sorted_parts((metrics.get(TRACK_P) or {}).get("by_parts") or {})
    series = [("strict", "#4878a8"), ("sub_problem_accuracy", "#e0823d"),
              ("prefix_score", "#6aa84f")]
    with matplotlib.style.context("default"):
        fig, ax = _figure(f"{TRACK_P}: by number of parts", top=1.25)  # room for the legend
        if parts:
            width = 0.8 / len(series)
            for i, (name, colour) in enumerate(series):
                xs = [j + (i - 1) * width for j in range(len(parts))]
                ax.bar(xs, [float(v.get(name) or 0.0) for _k, v in parts], width,
                       label=name.replace("sub_problem", "sub-problem").replace("_", " "),
                       color=colour)
            ax.set_xticks(range(len(parts)),
                          [f"{k} part(s)\nn={v.get('n', '?')}" for k, v in parts])
            ax.legend(loc="upper center", ncols=3, fontsize="small")
        else:
            ax.text(0.5, 0.5, "no items", ha="center", transform=ax.transAxes)
        return _png(fig)


def capped_table(frame: pd.DataFrame, source: str | os.PathLike[str],
                 limit: int = MAX_FINDINGS) -> str:
    """The first ``limit`` findings (there can be many); the rest are counted and pointed to."""
    more = len(frame) - limit
    note = (f"<p>… and {more} more in {html.escape(os.fspath(source))}.</p>"
            if more > 0 else "")
    return html_table(frame.head(limit), pre=["message"]) + note


def _records(value: Any, columns: Sequence[str], **aliases: str) -> pd.DataFrame:
    """A list of dicts as a frame with exactly ``columns``; ``aliases`` maps column -> fallback
    key. Lists in cells are joined, anything but a dict row is skipped."""
    rows = []
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, Mapping):
            row = {c: entry.get(c, entry.get(aliases.get(c, ""))) for c in columns}
            rows.append({c: ", ".join(map(str, v)) if isinstance(v, list) else v
                         for c, v in row.items()})
    # object dtype: a column of ints with a None stays ints (float64 would print "12.000").
    return pd.DataFrame(rows, columns=list(columns), dtype=object)


def validation_tables(validation: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """Errata applied, normalisations, counts, findings by rule, findings and warnings.

    The validator's report is read defensively: missing keys give empty tables, and both
    ``{"errata": {"applied": [...]}}`` and ``{"errata_applied": [...]}`` are understood.
    """
    errata = validation.get("errata_applied", validation.get("errata")) or []
    if isinstance(errata, Mapping):
        errata = errata.get("applied") or []
    finding_cols = ["file", "line", "track", "problem_id", "rule", "field", "message", "erratum"]
    # JSONL/CSV differences normalised away, and changes to the stored JSONL text.
    norm = [("JSONL vs CSV", k, v) for k, v in _flatten(validation.get("normalisations") or {})]
    norm += [("stored text", k, v)
             for k, v in _flatten(validation.get("stored_text_changes") or {})]
    by_rule = validation.get("findings_by_rule") or {}
    return {
        "errata": _records(errata, ["id", "track", "problem_id", "action", "field", "covers",
                                    "reason"]),
        "normalisations": pd.DataFrame(norm, columns=["source", "normalisation", "count"]),
        "counts": pd.DataFrame(_flatten(validation.get("counts") or {}),
                               columns=["count", "value"]),
        "by_rule": pd.DataFrame(
            [(r, c.get("covered"), c.get("violations"))
             for r, c in sorted(by_rule.items()) if isinstance(c, Mapping)],
            columns=["rule", "covered by an erratum", "not covered"], dtype=object),
        "findings": _records(validation.get("findings"), finding_cols, erratum="covered_by"),
        "warnings": _records(validation.get("warnings"), finding_cols[:-1]),
    }


def _details(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _model_text(pred: Mapping[str, Any]) -> str:
    """What the model actually said: raw text from details, else the error, else the answer."""
    raw = _details(pred.get("details")).get("raw_text")
    if isinstance(raw, str) and raw:
        return raw
    error = pred.get("error")
    if not _absent(error) and error:
        return f"[{pred.get('status')}] {error}"
    value = pred.get("prediction")
    if _absent(value):
        return ""
    if isinstance(value, str):
        return value
    # RIMO-P: a list (a numpy array once read back from Parquet) of per-part answers.
    return "\n\n".join(f"--- part {i} ---\n{v}" for i, v in enumerate(value, 1))


def _by_id(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    return {str(r["problem_id"]): r for r in frame.to_dict("records")}


_STATUS_ORDER = {"ok": 0, "error": 1, "missing": 2}  # real wrong answers before non-answers


def worst_failures_n(scores: pd.DataFrame, predictions: pd.DataFrame, items: pd.DataFrame,
                     limit: int) -> pd.DataFrame:
    """Up to ``limit`` wrong RIMO-N items: wrong answers first, then errors, then missing."""
    preds, problems = _by_id(predictions), _by_id(items)
    wrong = [r for r in scores.to_dict("records") if not bool(r["correct"])]
    wrong.sort(key=lambda r: (_STATUS_ORDER.get(r["status"], 3), str(r["problem_id"])))
    rows = []
    for r in wrong[:max(limit, 0)]:
        pid = str(r["problem_id"])
        rows.append({
            "problem_id": pid, "domain": r.get("domain"), "status": r["status"],
            "problem": _truncate(problems.get(pid, {}).get("problem"), 400),
            "gold": r.get("gold"), "prediction": r.get("prediction"),
            "model text": _truncate(_model_text(preds.get(pid, {}))),
        })
    return pd.DataFrame(rows, columns=["problem_id", "domain", "status", "problem", "gold",
                                       "prediction", "model text"])


def worst_failures_p(scores: pd.DataFrame, predictions: pd.DataFrame, limit: int) -> pd.DataFrame:
    """Up to ``limit`` gradable RIMO-P items that are not fully right, lowest prefix score first."""
    preds = _by_id(predictions)
    bad = [r for r in scores.to_dict("records") if bool(r["gradable"]) and not bool(r["strict"])]
    bad.sort(key=lambda r: (float(r["prefix_score"]), int(r["n_matched"]), str(r["problem_id"])))
    rows = []
    for r in bad[:max(limit, 0)]:
        pid = str(r["problem_id"])
        flags = r.get("matched")  # a numpy array once read back from Parquet
        matched = "".join("✓" if m else "✗" for m in (() if flags is None else flags))
        rows.append({
            "problem_id": pid, "domain": r.get("domain"), "parts": int(r["number_of_parts"]),
            "status": r["status"], "matched": matched or "—",
            "prefix score": float(r["prefix_score"]),
            "model text": _truncate(_model_text(preds.get(pid, {}))),
        })
    return pd.DataFrame(rows, columns=["problem_id", "domain", "parts", "status", "matched",
                                       "prefix score", "model text"])


def _distinct(frame: pd.DataFrame, column: str) -> str:
    values = sorted({str(v) for v in frame[column].dropna()}) if column in frame else []
    return ", ".join(values) if values else "—"


def provenance_rows(params: Mapping[str, Any], files: Mapping[str, str | os.PathLike[str]],
                    predictions: Mapping[str, pd.DataFrame], git_commit: str,
                    validation: Mapping[str, Any] | None = None,
                    metrics: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Everything needed to reproduce the numbers: upstream pin, artifact hashes, backend, params.

    ``files`` maps a label (the path as configured) to the file to hash; ``predictions`` maps a
    track to its predictions frame. ``validation`` and ``metrics`` add what their producers
    recorded (inputs read, errata file, package versions), when present.
    """
    fetch = params.get("fetch") or {}
    rows: list[tuple[str, str, str]] = [
        ("upstream", "repo", str(fetch.get("repo", "—"))),
        ("upstream", "revision", str(fetch.get("revision", "—"))),
        ("upstream", "folder", str(fetch.get("folder", "—"))),
    ]
    rows += [("upstream sha256 (params)", str(name), str(digest))
             for name, digest in sorted((fetch.get("sha256") or {}).items())]
    # What the validator actually read, so a mismatch with the params pin is visible.
    validation = validation or {}
    inputs = validation.get("inputs")
    for name, info in sorted(inputs.items()) if isinstance(inputs, Mapping) else ():
        digest = info.get("sha256") if isinstance(info, Mapping) else info
        rows.append(("validated input sha256", str(name), str(digest)))
    errata = validation.get("errata")
    if isinstance(errata, Mapping) and errata.get("sha256"):
        rows.append(("errata", f"{errata.get('file', 'errata')} (version "
                     f"{errata.get('version', '?')}) sha256", str(errata["sha256"])))
    rows += [("artifact sha256", str(label), sha256_file(path)) for label, path in files.items()]
    for track, frame in predictions.items():
        rows += [(f"predictions {track}", "backend", _distinct(frame, "backend")),
                 (f"predictions {track}", "fingerprint", _distinct(frame, "fingerprint")),
                 (f"predictions {track}", "backend_params", _distinct(frame, "backend_params"))]
    for name in ("predict", "score"):
        rows += [("params", f"{name}.{k}", v) for k, v in _flatten(params.get(name) or {})]
    rows.append(("code", "git commit", git_commit))
    # The score stage's own record: what it ran with (versions decide float results).
    recorded = (metrics or {}).get("provenance")
    if isinstance(recorded, Mapping):
        for key in ("params_fingerprint", "git", "packages"):
            if key in recorded:
                rows += [("score stage", k, v) for k, v in _flatten({key: recorded[key]})]
    return pd.DataFrame(rows, columns=["section", "item", "value"])


# --- execution -----------------------------------------------------------------------------------

def git_commit(cwd: str | os.PathLike[str] | None = None) -> str:
    """``git rev-parse HEAD``, or "unknown" outside a repository, before the first commit, or
    without git: the report must still render from an exported tree."""
    try:
        out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD"], cwd=cwd,
                             capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    sha = out.stdout.strip()
    if out.returncode != 0 or len(sha) != 40 or any(c not in "0123456789abcdef" for c in sha):
        return "unknown"
    return sha


def _kernel_manager_class() -> type:
    """A kernel manager whose "python3" is always ipykernel on *this* interpreter.

    A user-level kernelspec named python3 would otherwise win the lookup and could point at another
    Python without this project installed; building the spec in memory registers nothing.
    """
    from ipykernel.kernelspec import RESOURCES, get_kernel_dict
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import AsyncKernelManager

    # The kernel app's own log (a TCP-transport notice, "KeyboardInterrupt caught" on shutdown)
    # is noise in a batch stage; cell errors come back as messages and a dead kernel as an error.
    quiet = ["--IPKernelApp.log_level=CRITICAL"]

    class CurrentInterpreterKernelManager(AsyncKernelManager):
        @property
        def kernel_spec(self) -> KernelSpec:
            return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict(extra_arguments=quiet))

    return CurrentInterpreterKernelManager


def strip_volatile(nb: Any) -> Any:
    """Drop what varies between runs with the same inputs (timings, versions, paths, random ids)."""
    pm = nb.metadata.get("papermill", {})
    for key in _VOLATILE_NB_PAPERMILL:
        pm.pop(key, None)
    ids: set[str] = set()
    for index, cell in enumerate(nb.cells):
        cell.metadata.pop("execution", None)  # nbclient's iopub/shell timestamps
        for key in _VOLATILE_CELL_PAPERMILL:
            cell.metadata.get("papermill", {}).pop(key, None)
        # papermill gives the cell it injects a random id; nbformat 4.5 requires unique ids.
        if _INJECTED_TAG in cell.metadata.get("tags", []):
            cell["id"] = _INJECTED_TAG
        if not cell.get("id") or cell["id"] in ids:
            cell["id"] = f"cell-{index}"
        ids.add(cell["id"])
    return nb


def _check_inputs(parameters: Mapping[str, Any]) -> None:
    for name, (_default, stage) in INPUTS.items():
        if name in parameters and not Path(parameters[name]).is_file():
            hint = f"run the {stage} stage first" if stage else "run from the project root"
            raise StageError(f"{parameters[name]}: report input not found ({hint})")


def execute(notebook: str | os.PathLike[str], parameters: Mapping[str, Any],
            kernel_name: str = "python3") -> Any:
    """Run the notebook in a fresh kernel and return the stripped, executed notebook (not saved)."""
    import papermill as pm
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    notebook = Path(notebook)
    if not notebook.is_file():
        raise StageError(f"{notebook}: report notebook not found")
    declared = pm.inspect_notebook(str(notebook))
    unknown = sorted(set(parameters) - set(declared))
    if unknown:  # papermill only warns, and the notebook would silently use its defaults
        raise StageError(f"{notebook}: unknown parameter(s) {', '.join(unknown)}; "
                         f"the notebook declares {', '.join(sorted(declared))}")
    _check_inputs(parameters)
    extra: dict[str, Any] = {}
    if kernel_name == "python3":
        extra["kernel_manager_class"] = _kernel_manager_class()
    try:
        # output_path=None: papermill saves nothing itself, so a failure leaves no file.
        nb = pm.execute_notebook(str(notebook), None, parameters=dict(parameters),
                                 kernel_name=kernel_name, progress_bar=False,
                                 execution_timeout=CELL_TIMEOUT_S, **extra)
    except pm.PapermillExecutionError as exc:
        raise StageError(f"{notebook}: cell {exc.exec_count} failed: {exc.ename}: {exc.evalue}"
                         ) from exc
    except (NoSuchKernel, DeadKernelError, CellTimeoutError, RuntimeError) as exc:
        raise StageError(f"{notebook}: could not execute ({type(exc).__name__}: {exc})") from exc
    return strip_volatile(nb)


def to_html(nb: Any, title: str = "RIMO evaluation report") -> str:
    """nbconvert HTML with code cells and prompts hidden, so it reads as a report."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    body, _resources = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body


def render_report(notebook: str | os.PathLike[str], out_ipynb: str | os.PathLike[str],
                  out_html: str | os.PathLike[str], parameters: dict[str, Any],
                  kernel_name: str = "python3") -> None:
    """Execute ``notebook`` with ``parameters`` and write the executed notebook and its HTML.

    Both are built in memory first and then each published atomically; on any failure neither
    is written (a previous report stays as it was).
    """
    import nbformat

    # Paths become plain strings: papermill writes parameters into the notebook as literals.
    parameters = {k: os.fspath(v) if isinstance(v, os.PathLike) else v
                  for k, v in parameters.items()}
    nb = execute(notebook, parameters, kernel_name)
    ipynb_text = nbformat.writes(nb)
    if not ipynb_text.endswith("\n"):
        ipynb_text += "\n"
    html_text = to_html(nb)
    write_text(out_ipynb, ipynb_text)
    write_text(out_html, html_text)


def default_parameters(worst_failures: int, commit: str) -> dict[str, Any]:
    params: dict[str, Any] = {name: path.as_posix() for name, (path, _stage) in INPUTS.items()}
    params.update(git_commit=commit, worst_failures=worst_failures)
    return params


def run(params: dict[str, Any]) -> None:
    cfg = section(params, "report")
    worst = cfg.get("worst_failures", 10)
    if isinstance(worst, bool) or not isinstance(worst, int) or worst < 0:
        raise StageError(f"params.yaml: report.worst_failures must be an integer >= 0, "
                         f"got {worst!r}")
    render_report(NOTEBOOK, OUT_IPYNB, OUT_HTML, default_parameters(worst, git_commit()))
    print(f"report: wrote {OUT_IPYNB} and {OUT_HTML}", file=sys.stderr)
