"""The committed params file (git HEAD's) beside the one a run reads.

``dvc exp run -S key=value`` writes each value into the workspace's params.yaml and leaves it
there, a failed experiment's too, so the next run inherits it (a bad key fails every run after,
``limit: null`` makes the next paid run a full one). An error or a run that differs from HEAD's
file says so, and how to get the committed values back. ``--temp`` and ``--queue`` runs edit a
temporary copy (rimo_eval/io/workspace.py), never the workspace's file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from rimo_eval.io.git import git
from rimo_eval.io.workspace import DVC_ROOT_ENV

_ABSENT = object()
# What predict's drift line compares: what changes how many items, samples or which backend run.
RUN_SHAPE_KEYS = (("predict", "backend"), ("predict", "limit"), ("predict", "samples"))


def committed_params(path: str | os.PathLike[str]) -> Any | None:
    """HEAD's version of the params file at ``path``, parsed; None when there is none (no git,
    no commit, the file not committed, not YAML)."""
    p = Path(path)
    folder = p.parent if p.parent != Path("") else Path(".")
    text = git(folder, "show", f"HEAD:./{p.name}")
    if text is None:
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def value_at(data: Any, keys: Sequence[str]) -> Any:
    """The value at the key path, or ``_ABSENT``."""
    for key in keys:
        if not isinstance(data, Mapping) or key not in data:
            return _ABSENT
        data = data[key]
    return data


def in_temporary_copy() -> bool:
    """Whether this process runs in DVC's temporary copy of the repo (``--temp``, ``--queue``):
    there an experiment's -S never reaches the workspace's params file."""
    root = os.environ.get(DVC_ROOT_ENV)
    return root is not None and Path(root).resolve() != Path.cwd().resolve()


def shown(value: Any) -> str:
    """A value as YAML writes it inline (``null``, ``5``, ``'1'``)."""
    return str(yaml.safe_dump(value, default_flow_style=True, width=10**6)).strip() \
        .removesuffix("...").strip()


def origin_hint(name: str, keys: Sequence[str], data: Any, committed: Any) -> str | None:
    """Where the bad value at ``keys`` came from, when it is not the committed file's: the
    advice to remove it or restore the file. None when HEAD's file has the same value."""
    if committed is None:
        return None
    here, there = value_at(data, keys), value_at(committed, keys)
    if here is _ABSENT or here == there:
        return None
    where = ".".join(keys)
    if in_temporary_copy():
        now = ("is not in" if there is _ABSENT
               else f"is {shown(here)} here, {shown(there)} in")
        return (f"{where} {now} the committed {name} (HEAD): this experiment's -S set it (the "
                "workspace's file is untouched)")
    left = "DVC leaves every `dvc exp run -S` value in the file, a failed run's too"
    if there is _ABSENT:
        return (f"{where} is in {name} now, not in the committed one (HEAD): {left}: remove it "
                f"or `git checkout {name}`")
    return (f"{where} is {shown(here)} in {name} now, {shown(there)} in the committed one (HEAD): "
            f"{left}: `git checkout {name}` restores it")


def drift(path: str | os.PathLike[str], data: Any,
          keys: Sequence[Sequence[str]] = RUN_SHAPE_KEYS) -> list[str]:
    """``key value (HEAD: value)`` for each of ``keys`` whose value differs from the committed
    file's; empty when there is no committed file."""
    committed = committed_params(path)
    if committed is None:
        return []
    out = []
    for key in keys:
        here, there = value_at(data, key), value_at(committed, key)
        if here != there:
            head = "absent" if there is _ABSENT else shown(there)
            now = "absent" if here is _ABSENT else shown(here)
            out.append(f"{'.'.join(key)} {now} (HEAD: {head})")
    return out


def drift_warning(stage: str, path: str | os.PathLike[str], data: Any) -> str | None:
    """The warning predict prints when the run's backend, limit or samples are not the
    committed file's (an earlier experiment's -S left in the file reads the same as this run's
    own -S: the line says both)."""
    found = drift(path, data)
    if not found:
        return None
    name = Path(path).name
    origin = ("set by this experiment's -S" if in_temporary_copy() else
              f"this run's -S, or left in {name} by an earlier `dvc exp run -S` or `dvc exp "
              f"apply` (`git checkout {name}` restores the committed values)")
    return (f"{stage}: warning: not the committed {name} (HEAD): {'; '.join(found)}: "
            f"{origin}")


def quoting_hint(keys: Sequence[str], value: Any) -> str:
    """For a text key given a number or a boolean (YAML, and DVC's -S, read ``1`` as a number):
    the quoted form, in both places the value can come from."""
    text = shown(value)
    kind = "a boolean" if isinstance(value, bool) else "a number"
    return (f"; YAML reads {text} as {kind}: quote it, -S '{'.'.join(keys)}=\"{text}\"' on the "
            f"command line, {keys[-1]}: \"{text}\" in the file")
