"""Small item tables built by the tests, in the exact schema the validate stage writes, and
typed params sections built from partial dicts (what the stage functions take)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from rimo_eval.artifacts.items import ITEM_SCHEMAS, items_path
from rimo_eval.io.hashing import fingerprint
from rimo_eval.params.backends import BY_NAME
from rimo_eval.params.config import (
    Params,
    PredictParams,
    parse_params,
    parse_section,
    read_yaml,
)
from rimo_eval.params.section import Section
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P

S = TypeVar("S", bound=Section)
PARAMS_FILE = Path(__file__).resolve().parents[2] / "params.yaml"


def n_item(pid: str, answer: str, domain: str = "algebra") -> dict:
    row = {"track": TRACK_N, "problem_id": pid, "problem": f"Problem {pid}?", "domain": domain,
           "number_of_parts": 1, "gradable": True, "ungradable_reason": None,
           "solution": "Because.", "answer": answer}
    return {**row, "content_hash": fingerprint(row)}


def p_item(pid: str, solutions: list[str], gradable: bool = True) -> dict:
    row = {"track": TRACK_P, "problem_id": pid, "problem": f"Prove {pid}.", "domain": None,
           "number_of_parts": len(solutions), "gradable": gradable,
           "ungradable_reason": None if gradable else "no reference sub-solution",
           "sub_problems": [f"{pid} part {i + 1}" for i in range(len(solutions))],
           "sub_solutions": solutions}
    return {**row, "content_hash": fingerprint(row)}


def write_items(items_dir: Path, n_rows: list[dict], p_rows: list[dict]) -> None:
    for track, rows in ((TRACK_N, n_rows), (TRACK_P, p_rows)):
        path = items_path(track, items_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=ITEM_SCHEMAS[track]), path)


def small_benchmark(items_dir: Path) -> None:
    """Four RIMO-N items over two domains, four RIMO-P items (one ungradable)."""
    write_items(
        items_dir,
        [n_item("2001a1", "12"), n_item("2001a2", "-3"), n_item("2001c1", "7", "combinatorics"),
         n_item("2001c2", "100", "combinatorics")],
        [p_item("2001a1", ["s1"]), p_item("2001g1", ["g1", "g2"]),
         p_item("2001n1", ["n1", "n2", "n3"]), p_item("2005p3", [""], gradable=False)],
    )


def section(model: type[S], where: str, data: Mapping[str, Any] | None = None,
            **keys: Any) -> S:
    """A typed params section (``where``: its key path, e.g. ``predict.openai``) from a partial
    dict and keys, validated as the file's would be (a bad key is the same ConfigError)."""
    return parse_section(model, {**(data or {}), **keys}, where)


def backend_section(name: str, data: Mapping[str, Any] | None = None, /, **keys: Any
                    ) -> Section:
    """Built-in backend ``name``'s typed section (``predict.<name>``), as ``section`` builds it:
    what ``create_predictor(name, ...)`` and the predictor classes take."""
    return section(BY_NAME[name].params_model, f"predict.{name}", {**(data or {}), **keys})


def predict_section(data: Mapping[str, Any] | None = None, **keys: Any) -> PredictParams:
    """The typed ``predict`` section the predict stage takes (``section`` of PredictParams)."""
    return section(PredictParams, "predict", data, **keys)


def params(**overrides: Any) -> Params:
    """The project's params.yaml, validated, with whole sections replaced (``params(judge=
    {"enabled": False})``: that judge section and no other key of it); a section given as None
    is left out (its defaults, where it has them)."""
    data = read_yaml(PARAMS_FILE)
    for name, value in overrides.items():
        if value is None:
            data.pop(name, None)
        else:
            data[name] = value
    return parse_params(data, PARAMS_FILE)
