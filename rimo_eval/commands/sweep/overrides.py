"""A sweep's ``params`` values as ``dvc exp run -S KEY=VALUE`` words, and the proof at submit
that DVC gives each task exactly the value its sweep file says.

DVC reads ``VALUE`` with Hydra's override grammar, not YAML: a comma makes a sweep (refused
without ``--queue``), an apostrophe is a lexer error, ``1e3`` is the float 1000.0, ``${...}`` is
an OmegaConf interpolation (``${oc.env:VAR}`` would copy an environment variable into
params.yaml). ``hydra_value`` writes every string as a quoted Hydra string (apostrophes and the
backslashes before them escaped, ``${`` escaped) and lists and mappings in Hydra's own syntax.

``round_trip`` then does what the task's ``dvc exp run`` will do, with DVC's own code: each word
through Hydra's parser (``dvc.utils.hydra.to_hydra_overrides``, with the sweep check of
``dvc exp run``), all of a task's words applied to a copy of params.yaml
(``dvc.utils.hydra.apply_overrides``, ruamel's writer included), and the file read back as the
stages read it. Any value that does not come back as itself (type included: ``"yes"`` is
written unquoted by DVC's YAML 1.2 writer and read as ``true`` by the stages) is refused with
its key path, so ``--dry-run`` fails where the node would.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rimo_eval.errors import ConfigError
from rimo_eval.params.yaml_file import load_unique

# Linux refuses a single argv word longer than this (MAX_ARG_STRLEN, with its NUL): E2BIG.
ARG_BYTES_MAX = 32 * 4096 - 1
_ESCAPED = re.compile(r"(\\*)('|\$\{|\Z)")


@dataclass(frozen=True)
class Entry:
    where: str  # the sweep file's key path that gave the value
    key: str  # the params key path
    value: Any


def hydra_value(value: Any) -> str:
    """``value`` in Hydra's override grammar; TypeError for what YAML has and Hydra has not."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        # In a quoted Hydra string, backslashes are literal except those before a quote (the
        # closing one too) or before an escaped ``${``: those are doubled.
        return "'" + _ESCAPED.sub(lambda m: m.group(1) * 2 + {"'": "\\'", "${": "\\${"}.get(
            m.group(2), ""), value) + "'"
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value).__name__)


def word(path: Path, entry: Entry) -> str:
    """``KEY=VALUE`` for ``-S``; the value's type refused when Hydra cannot carry it."""
    try:
        text = f"{entry.key}={hydra_value(entry.value)}"
    except TypeError as exc:
        raise ConfigError(f"{path}: {entry.where}: a {exc} value cannot be passed to "
                          f"`dvc exp run -S`: write it as a string, a number, a boolean, null, "
                          f"a list or a mapping") from None
    if len(text.encode("utf-8")) > ARG_BYTES_MAX:
        raise ConfigError(f"{path}: {entry.where}: `-S {entry.key}=...` is "
                          f"{len(text.encode('utf-8'))} bytes, more than one command-line "
                          f"argument may hold ({ARG_BYTES_MAX})")
    return text


def _lookup(data: Any, key: str) -> tuple[bool, Any]:
    for part in key.split("."):
        if not isinstance(data, dict) or part not in data:
            return False, None
        data = data[part]
    return True, data


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type all the way down (1 is not 1.0, "1e3" is not 1000.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def skeleton(entries: Sequence[Entry]) -> str:
    """A params.yaml holding each key (null): what the words are applied to with no project
    params at hand (Hydra refuses a key the file does not have)."""
    import yaml

    data: dict[str, Any] = {}
    for entry in entries:
        node = data
        *parents, leaf = entry.key.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node.setdefault(leaf, None)
    return yaml.safe_dump(data)


def _first_line(exc: BaseException) -> str:
    """The gist of DVC's, Hydra's or OmegaConf's error: its first two lines, on one."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {' '.join(lines[:2])}" if lines else type(exc).__name__


def _apply(params_text: str, words: list[str]) -> tuple[Any, str | None]:
    """(params as the stages read them, None) after DVC applied ``words``; (None, why) when
    DVC refuses them."""
    from dvc.exceptions import InvalidArgumentError
    from dvc.utils.hydra import apply_overrides

    with tempfile.TemporaryDirectory(prefix="rimo-sweep-") as tmp:
        file = Path(tmp) / "params.yaml"
        file.write_text(params_text, encoding="utf-8")
        try:
            apply_overrides(file, words)
        except InvalidArgumentError as exc:
            cause = exc.__cause__ or exc
            return None, _first_line(cause)
        except Exception as exc:
            return None, _first_line(exc)
        return load_unique(file.read_text(encoding="utf-8"), "params.yaml") or {}, None


def round_trip(path: Path, entries: Sequence[Entry], params_text: str | None,
               label: str) -> dict[str, Any]:
    """The params DVC writes for one task's ``entries`` (applied to ``params_text``, or to a
    skeleton of their keys); ConfigError naming the first value that does not come back as
    itself. ``label`` says what the params are (the project's at a commit)."""
    from dvc.utils.hydra import to_hydra_overrides
    from hydra.errors import HydraException

    words = [word(path, entry) for entry in entries]
    for entry, text in zip(entries, words, strict=True):
        try:
            parsed = to_hydra_overrides([text])
        except HydraException as exc:
            raise ConfigError(f"{path}: {entry.where}: DVC's -S grammar cannot read "
                              f"{text!r}: {_first_line(exc)}") from None
        if any(override.is_sweep_override() for override in parsed):
            raise ConfigError(f"{path}: {entry.where}: DVC reads {text!r} as a sweep")
    base = skeleton(entries) if params_text is None else params_text
    result, why = _apply(base, words)
    if why is not None:
        for entry, text in zip(entries, words, strict=True):  # name the word DVC refuses
            if _apply(base, [text])[1] is not None:
                raise ConfigError(f"{path}: {entry.where}: `dvc exp run -S {text}` on {label} "
                                  f"fails: {_apply(base, [text])[1]}")
        raise ConfigError(f"{path}: `dvc exp run` refuses these -S values together on "
                          f"{label}: {why}")
    for entry in entries:
        found, got = _lookup(result, entry.key)
        if not found or not same(entry.value, got):
            shown = repr(got) if found else "nothing"
            raise ConfigError(f"{path}: {entry.where}: {entry.value!r} would reach params.yaml "
                              f"through `dvc exp run -S` as {shown} (DVC reads the value with "
                              f"Hydra's grammar and writes it with ruamel's YAML 1.2); write a "
                              f"value that survives, e.g. a number as a number")
    return dict(result) if isinstance(result, dict) else {}
