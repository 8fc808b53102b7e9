"""Small item tables built by the tests, in the exact schema the validate stage writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rimo_eval.artifacts.items import ITEM_SCHEMAS, items_path
from rimo_eval.io.hashing import fingerprint
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P


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
