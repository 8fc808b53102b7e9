"""Executing the report notebook: papermill in a fresh kernel, then the HTML export.

Both outputs are byte-stable: papermill's and nbclient's timings, versions and paths are stripped,
and the papermill-injected cell gets a fixed id, so a rerun with unchanged inputs reproduces the
executed notebook and its HTML exactly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rimo_eval.errors import StageError
from rimo_eval.io.atomic import write_text
from rimo_eval.io.git import head_commit
from rimo_eval.render.katex import AUTO_RENDER, inline_css, inline_script, katex_dir

CELL_TIMEOUT_S = 600  # a report cell takes seconds; a hang should fail the stage, not block it

# Papermill/nbclient metadata that changes on every run (or with the machine) but not with inputs.
_VOLATILE_NB_PAPERMILL = ("start_time", "end_time", "duration", "environment_variables",
                          "version", "input_path", "output_path")
_VOLATILE_CELL_PAPERMILL = ("start_time", "end_time", "duration")
_INJECTED_TAG = "injected-parameters"


def git_commit(cwd: str | os.PathLike[str] | None = None) -> str:
    """HEAD's sha, or "unknown" outside a repository, before the first commit, or without
    git: the report must still render from an exported tree."""
    return head_commit(cwd or ".") or "unknown"


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
    quiet = ["--IPKernelApp.log_level=CRITICAL",
             # No input history: a batch kernel never reads it back, and keeping it costs the
             # kernel start an SQLite database in ~/.ipython and a thread that writes it.
             "--HistoryManager.enabled=False"]

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


def _check_inputs(parameters: Mapping[str, Any], producers: Mapping[str, str]) -> None:
    """Each parameter in ``producers`` names an input file; ``producers`` maps it to the stage
    that writes it (named in the error), or "" for a file the user provides."""
    for name, stage in producers.items():
        if name in parameters and not Path(parameters[name]).is_file():
            hint = f"run the {stage} stage first" if stage else "run from the project root"
            raise StageError(f"{parameters[name]}: report input not found ({hint})")


def execute(notebook: str | os.PathLike[str], parameters: Mapping[str, Any],
            kernel_name: str = "python3", producers: Mapping[str, str] | None = None) -> Any:
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
    _check_inputs(parameters, producers or {})
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


# nbconvert's lab template, offline (rimo_eval/report/nbconvert/rimo): no require.js, MathJax or
# mermaid from a CDN; KaTeX inlined, so report.html is one file that makes no request.
TEMPLATE_DIR = Path(__file__).parent / "nbconvert"
TEMPLATE = "rimo"


def html_exporter() -> tuple[Any, dict[str, str]]:
    """nbconvert's exporter (code cells and prompts hidden, so it reads as a report) and the
    KaTeX it inlines."""
    from nbconvert import HTMLExporter

    folder = katex_dir()
    exporter = HTMLExporter(template_name=TEMPLATE, extra_template_basedirs=[str(TEMPLATE_DIR)],
                            exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True,
                            # One schema validation of the result, not one after each of its
                            # preprocessors (a 1 MB notebook, each a fraction of a second).
                            optimistic_validation=True)
    katex = {"css": inline_css(folder), "js": inline_script(folder, "katex.min.js"),
             "auto_render": inline_script(folder, AUTO_RENDER)}
    return exporter, katex


def to_html(nb: Any, title: str = "RIMO evaluation report") -> str:
    """The executed notebook as one HTML page."""
    html, katex = html_exporter()
    body: str
    body, _resources = html.from_notebook_node(
        nb, resources={"metadata": {"name": title}, "rimo_katex": katex})
    return body


def render_report(notebook: str | os.PathLike[str], out_ipynb: str | os.PathLike[str],
                  out_html: str | os.PathLike[str], parameters: Mapping[str, Any],
                  kernel_name: str = "python3",
                  producers: Mapping[str, str] | None = None) -> None:
    """Execute ``notebook`` with ``parameters`` and write the executed notebook and its HTML.

    Both are built in memory first and then each published atomically; on any failure neither
    is written (a previous report stays as it was).
    """
    import nbformat

    # Paths become plain strings: papermill writes parameters into the notebook as literals.
    params = {k: os.fspath(v) if isinstance(v, os.PathLike) else v
              for k, v in parameters.items()}
    # One thread: the exporter was once made in a second thread while the kernel ran, and its
    # nbconvert import raced papermill's for jupyter_client ("partially initialized module"):
    # the report stage failed on a quiet machine, for a saving of about 0.15 s.
    nb = execute(notebook, params, kernel_name, producers)
    ipynb_text = nbformat.writes(nb)
    if not ipynb_text.endswith("\n"):
        ipynb_text += "\n"
    html_text = to_html(nb)
    write_text(out_ipynb, ipynb_text)
    write_text(out_html, html_text)
