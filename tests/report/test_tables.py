"""Tables without pandas, and the command's quick exit.

``table_from_rows`` must build exactly what ``pa.Table.from_pylist`` builds (same columns,
types, metadata and Parquet bytes), so that predict can publish its tables without importing
pandas; a whole predict run in a fresh interpreter must then load no pandas. ``cli.entry``
skips the interpreter's teardown, but still runs the exit handlers, flushes the streams and
waits for a non-daemon thread.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rimo_eval.artifacts.predictions import PREDICTION_SCHEMAS, RUN_ID_META
from rimo_eval.io.parquet import COMPRESSION, table_from_rows
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import small_benchmark

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def common(i: int) -> dict[str, Any]:
    return {"track": TRACK_N, "problem_id": f"20{i:02d}a1", "sample": i % 3,
            "item_hash": f"h{i}", "status": "ok" if i % 4 else "error",
            "error": None if i % 4 else f"HTTP 500: \"quoted\"\nsecond line {i}",
            "details": json.dumps({"usage": {"prompt_tokens": i}, "text": "é∑😀\t\\boxed{3}"}),
            "backend": "openai", "backend_params": "{}", "fingerprint": "f" * 64,
            "run_id": "r" * 64}


def rows_of(track: str) -> list[dict[str, Any]]:
    rows = []
    for i in range(40):
        if track == TRACK_N:
            text = "" if i % 7 == 0 else f"{i}\u00b2 \\frac{{1}}{{2}}"
            value: Any = None if i % 5 == 0 else text
            reasoning: Any = None if i % 3 == 0 else f"think {i} 😀 \\boxed{{{i}}}"
            raw: Any = None if i % 2 else f"<think>{i}</think> {text}"
        else:
            value = None if i % 5 == 0 else [f"part {k}: ∎ {'x' * (k * 300)}" for k in range(i % 4)]
            reasoning = None if i % 5 == 0 else [None if k % 2 else f"r{k} ∑" for k in range(i % 4)]
            raw = None if i % 5 == 0 else [None] * (i % 4)
        rows.append({**common(i), "track": track, "prediction": value, "reasoning": reasoning,
                     "raw_text": raw})
    return rows


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=COMPRESSION)
    return sink.getvalue()


@pytest.mark.parametrize("track", [TRACK_N, TRACK_P])
def test_table_from_rows_is_from_pylist(track: str) -> None:
    schema = PREDICTION_SCHEMAS[track].with_metadata({RUN_ID_META: b"r" * 64})
    rows = rows_of(track)
    got = table_from_rows(rows, schema)
    want = pa.Table.from_pylist(rows, schema=schema)
    assert got.equals(want, check_metadata=True)
    assert got.schema == want.schema and got.schema.metadata == want.schema.metadata
    assert parquet_bytes(got) == parquet_bytes(want)  # byte-identical files
    assert got.to_pylist() == rows


def test_no_rows_give_the_empty_table_with_its_metadata() -> None:
    schema = PREDICTION_SCHEMAS[TRACK_P].with_metadata({RUN_ID_META: b"x"})
    got = table_from_rows([], schema)
    assert got.num_rows == 0 and got.schema == schema
    assert got.schema.metadata == {RUN_ID_META: b"x"}


def test_a_value_of_the_wrong_type_is_refused() -> None:
    row = {**common(1), "prediction": "1", "sample": "zero"}
    with pytest.raises(pa.ArrowInvalid):
        table_from_rows([row], PREDICTION_SCHEMAS[TRACK_N])


PREDICT_RUN = """
import json, sys
from pathlib import Path
from rimo_eval.params.config import PredictParams, parse_section
from rimo_eval.predict import predict
from tests.support.chat_server import ChatServer

server = ChatServer().start()
cfg = {"backend": "openai", "openai": {"base_url": server.base_url, "model": "fake",
       "api_key_env": None, "cache_dir": sys.argv[2], "concurrency": 4}}
out = predict(parse_section(PredictParams, cfg, "predict"), Path(sys.argv[1]) / "items",
              Path(sys.argv[1]) / "preds")
print(json.dumps({"counts": out["counts"], "pandas": "pandas" in sys.modules}))
"""


def test_a_predict_run_never_imports_pandas(tmp_path: Path) -> None:
    small_benchmark(tmp_path / "items")
    done = subprocess.run([sys.executable, "-c", PREDICT_RUN, str(tmp_path),
                           str(tmp_path / "cache")], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=120, check=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["pandas"] is False, done.stderr
    assert got["counts"][TRACK_N]["ok"] == 4 and got["counts"][TRACK_P]["ok"] == 4
    # What was written reads back whole with pandas, as score reads it.
    import pandas as pd

    frame = pd.read_parquet(tmp_path / "preds" / "rimo_p.parquet")
    assert len(frame) == 4 and set(frame["status"]) == {"ok"}


ENTRY = """
import atexit, sys, threading, time
from pathlib import Path
from rimo_eval import cli

atexit.register(lambda: print("exit handler ran"))
marker = Path(sys.argv[2])
if sys.argv[1] == "thread":
    def late() -> None:
        time.sleep(0.3)
        marker.write_text("done")
    threading.Thread(target=late).start()
print("unflushed line", end="")
sys.argv = ["rimo-eval", "--params", "missing.yaml", "predict"]
cli.entry()
"""


@pytest.mark.parametrize("mode", ["quick", "thread"])
def test_the_command_exit_keeps_handlers_streams_and_threads(tmp_path: Path, mode: str) -> None:
    marker = tmp_path / "late.txt"
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(ENTRY), mode, str(marker)],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "missing.yaml: params file not found" in done.stderr
    assert done.stdout == "unflushed lineexit handler ran\n"
    assert marker.exists() == (mode == "thread")  # a non-daemon thread is waited for
