"""The text spool: a finished prediction's long texts wait on disk and come back unchanged, so
the tables a spooled run writes are the very bytes of one that held every text in memory."""

from __future__ import annotations

import copy
from pathlib import Path

import pyarrow.parquet as pq

from rimo_eval.artifacts import predictions
from rimo_eval.artifacts.items import load_items
from rimo_eval.artifacts.predictions import (
    RAW_TEXT,
    REASONING,
    Prediction,
    build_table,
    join_texts,
    write_table,
)
from rimo_eval.artifacts.text_spool import TextSpool
from rimo_eval.io.hashing import fingerprint
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.factories import n_item, p_item, write_items

LONG = "Let $x^2 = 4$. " * 2000  # about 30 KB, as a reasoning model writes


def n_pred(pid: str, sample: int, reasoning: str | None, raw: str | None) -> Prediction:
    details = {"text": "so \\boxed{2}", "usage": {"completion_tokens": 7}}
    if reasoning is not None:
        details[REASONING] = reasoning
    details[RAW_TEXT] = details["text"] if raw is None else raw  # as the engine records it
    return Prediction(TRACK_N, pid, "2", details=details, sample=sample)


def p_pred(pid: str) -> Prediction:
    parts = [{"text": "part one", REASONING: LONG, RAW_TEXT: "<think>" + LONG + "</think>one"},
             {"text": "part two", RAW_TEXT: "part two"}]
    return Prediction(TRACK_P, pid, ["a", "b"], details={"parts": parts})


def test_parked_texts_come_back_as_they_went(tmp_path: Path) -> None:
    lone = "step \ud800 then"  # a lone surrogate a server's JSON escape can carry
    preds = [n_pred("n1", 0, LONG, "<think>" + LONG + "</think>so \\boxed{2}"),
             n_pred("n1", 1, lone, None), n_pred("n2", 0, None, "so \\boxed{2}"),
             p_pred("p1")]
    before = [copy.deepcopy(p.details) for p in preds]
    with TextSpool(tmp_path) as spool:
        for pred in preds:
            spool.park(pred)
            spool.park(pred)  # a second park does nothing
        assert spool.parked == 3  # n2 has nothing long: its (empty) texts stay in memory
        assert spool.bytes > 2 * len(LONG.encode())
        for pred, details in zip(preds, before, strict=True):
            assert REASONING not in str(pred.details.keys())  # light now
            assert pred.texts is not None
            assert join_texts(pred.track, pred.details, *pred.texts.read()) == details
    # The file has no name: nothing is left beside the outputs, even before a clean close.
    assert list(tmp_path.iterdir()) == []


def test_tables_are_byte_identical_with_and_without_the_spool(tmp_path: Path) -> None:
    write_items(tmp_path / "items", [n_item("n1", "2"), n_item("n2", "2")],
                [p_item("p1", ["a", "b"])])
    items = {t: load_items(t, tmp_path / "items") for t in (TRACK_N, TRACK_P)}

    def preds() -> dict[tuple[str, str, int], Prediction]:
        made = [n_pred("n1", 0, LONG, "<think>" + LONG + "</think>so \\boxed{2}"),
                n_pred("n1", 1, None, None), n_pred("n2", 0, "short", None),
                n_pred("n2", 1, LONG, None), p_pred("p1")]
        return {p.sample_key: p for p in made}

    identity = {"backend": "test"}
    fp = fingerprint(identity)
    held = preds()
    with TextSpool(tmp_path / "spool") as spool:
        parked = preds()
        for pred in parked.values():
            spool.park(pred)
        for track, k in ((TRACK_N, 2), (TRACK_P, 1)):
            run = predictions.run_id(fp, items, k)
            write_table(build_table(track, items[track], held, identity, fp, k, run),
                        tmp_path / "held.parquet")
            write_table(build_table(track, items[track], parked, identity, fp, k, run),
                        tmp_path / "parked.parquet")
            assert (tmp_path / "held.parquet").read_bytes() == \
                (tmp_path / "parked.parquet").read_bytes()
            table = pq.read_table(tmp_path / "parked.parquet").to_pylist()
            if track == TRACK_N:
                assert table[0][REASONING] == LONG and LONG not in table[0]["details"]
                assert table[1][RAW_TEXT] is None  # equal to details.text: not stored twice
            else:
                assert table[0][REASONING] == [LONG, None]
