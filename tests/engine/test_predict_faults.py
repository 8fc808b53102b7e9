"""The predict stage under fire: a faulty model server and ``kill -9`` at seeded-random points.

One loopback ``ChatServer`` (tests/support/chat_server.py) serves ~80 items whose problem texts
carry fault directives (429/5xx bursts, hangs past the client timeout, dropped connections,
malformed bodies, empty choices, and a few persistent failures that must end as recorded errors).
The predict stage runs as a real subprocess (``python -m rimo_eval --params ... predict`` in a
scratch project dir) and is SIGKILLed several times: once during start-up, several times with
requests in flight, and twice inside the publish step (through the ``io.atomic`` test hook). After
every kill: the predictions tables are byte for byte the previous complete ones (never torn;
the kill between the two renames leaves the new RIMO-N table beside the old RIMO-P one, each
whole), every cache entry parses and matches its key, and nothing cached is requested again. The run
that finally completes must equal an uninterrupted reference run item by item and metric by
metric (``rimo_eval.score.score``, provenance excluded).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from rimo_eval.artifacts.predictions import predictions_path
from rimo_eval.io.atomic import PAUSE_ENV
from rimo_eval.predict import predict
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.chat_server import ChatServer
from tests.support.factories import predict_section, write_items
from tests.support.paths import REPO_ROOT
from tests.support.predict_faults import (
    CONCURRENCY,
    HOOK_LINE,
    INFLIGHT_KILLS,
    KEY_ENV,
    N_COUNT,
    SEED,
    STARTUP_KILLS,
    Stage,
    build_items,
    cache_state,
    file_bytes,
    metrics_of,
    openai_config,
    outcomes_of,
    predict_cfg,
    predictions,
)

pytestmark = [pytest.mark.chat_server(latency_s=0.03, hang_s=3.0), pytest.mark.serial]


@pytest.fixture
def server(server: ChatServer) -> Iterator[ChatServer]:
    """The shared fake server, and no predict process left behind after the test."""
    yield server
    while Stage.live:  # a failed test must not leave a predict process behind
        proc = Stage.live.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_predict_survives_faults_and_sigkill_loop(server: ChatServer, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    began = time.monotonic()
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(PAUSE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # score's provenance asks git about the cwd: not /work/main
    rng = random.Random(SEED)
    n_rows, p_rows = build_items(rng)
    items_dir = tmp_path / "work" / "data" / "items"
    write_items(items_dir, n_rows, p_rows)
    wanted = {(TRACK_N, r["problem_id"]) for r in n_rows} | {(TRACK_P, r["problem_id"])
                                                            for r in p_rows}

    # 1. The reference: the same faults, one uninterrupted run, in-process.
    ref = tmp_path / "ref"
    predict(predict_section(predict_cfg(openai_config(server, ref / "cache"))), items_dir,
            ref / "preds")
    ref_preds = predictions(ref / "preds")
    ref_metrics = metrics_of(ref, items_dir, ref / "preds")
    ref_ok = {r.prompt for r in server.ok_records()}
    ref_outcomes = outcomes_of(server)
    distinct = len(ref_ok)
    # The comparison below means something only if faults fired and metrics are not trivial.
    assert set(ref_preds) == wanted
    statuses = Counter(v[0] for v in ref_preds.values())
    assert statuses["error"] == 2 + 1 + 1 and statuses["ok"] == len(wanted) - 4, statuses
    assert 0 < ref_metrics[TRACK_N]["accuracy"] < 1
    assert 0 < ref_metrics[TRACK_P]["prefix_score"] < ref_metrics[TRACK_P]["n"]
    assert 0 < ref_metrics[TRACK_P]["strict"] < 1
    for outcome in ("http-429", "http-500", "http-502", "http-503", "http-400", "drop", "hang",
                    "malformed", "empty"):
        assert ref_outcomes[outcome] > 0, ref_outcomes

    # 2. The interrupted run: a scratch project whose previous predictions come from another
    # backend, so "unchanged" is observable; same server, fresh attempt counters and cache.
    server.reset()
    work = tmp_path / "work"
    out_dir = work / "data" / "predictions"
    predict(predict_section(backend="constant", limit=None,
                            constant={"answer": "0", "solution": ""}),
            items_dir, out_dir)
    previous = file_bytes(out_dir)
    cache_dir = work / "cache"
    params = work / "params.yaml"
    # The whole file: the CLI validates every section before the stage runs.
    full = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    full["predict"] = predict_cfg(openai_config(server, cache_dir))
    params.write_text(yaml.safe_dump(full))

    kills: list[dict[str, Any]] = []  # per kill: server records so far, prompts cached

    def after_kill(kind: str, expect_tables: dict[str, bytes | None]) -> None:
        time.sleep(0.05)  # let a request that was still being read be recorded before the cut
        cached, debris = cache_state(cache_dir)
        answered = {r.prompt for r in server.ok_records()}
        assert cached <= answered, "a cache entry the server never answered"
        assert file_bytes(out_dir) == expect_tables, f"predictions changed by the {kind} kill"
        kills.append({"kind": kind, "records": len(server.records), "cached": cached,
                      "lost": {r.prompt for r in server.records} - cached,
                      "debris": len(debris)})

    index = 0
    for _ in range(STARTUP_KILLS):  # most likely while importing or loading the items
        stage = Stage(work, params, index := index + 1)
        time.sleep(rng.uniform(0.2, 1.0))
        stage.kill()
        after_kill("startup", previous)
    for _ in range(INFLIGHT_KILLS):
        # Kill once this process has sent a random number of requests, after a random delay;
        # the budget leaves work undone, so no kill here can land in the publish step.
        stage = Stage(work, params, index := index + 1)
        before, target = len(server.records), rng.randint(3, 9)
        stage.wait_until(lambda b=before, t=target: len(server.records) - b >= t, 30,
                         f"{target} requests")
        time.sleep(rng.uniform(0.0, 0.04))
        stage.kill()
        after_kill("in-flight", previous)
        assert len(kills[-1]["cached"]) < distinct, "the run finished before it was killed"
    # Inside the publish step: before the first rename (both tables must stay the previous
    # ones), then between the two renames (each table whole: the new RIMO-N, the old RIMO-P).
    for nth in (1, 2):
        stage = Stage(work, params, index := index + 1, pause=f"60@{nth}")
        stage.wait_until(lambda s=stage, n=nth: s.text().count(HOOK_LINE) >= n, 40,
                         f"publish {nth}")
        stage.kill()
        expect = dict(previous)
        if nth == 2:
            expect[TRACK_N] = predictions_path(TRACK_N, out_dir).read_bytes()
            assert expect[TRACK_N] != previous[TRACK_N]
            assert len(pq.read_table(predictions_path(TRACK_N, out_dir))) == N_COUNT
        after_kill(f"publish-{nth}", expect)
        assert kills[-1]["cached"] == ref_ok  # everything was answered before publishing
        assert list(out_dir.glob(".*.tmp")), "the kill should leave the unpublished temp file"

    # 3. The re-run that completes.
    final = Stage(work, params, index + 1)
    assert final.proc.wait(timeout=60) == 0, final.text()[-3000:]
    assert not list(out_dir.glob(".*.tmp")), "stale temporary tables left behind"
    got = predictions(out_dir)
    assert set(got) == wanted  # every item, exactly once
    assert got == ref_preds  # status, prediction, error and fingerprint, item by item
    assert metrics_of(work, items_dir, out_dir) == ref_metrics
    cached, debris = cache_state(cache_dir)
    assert cached == ref_ok
    assert not debris, debris

    # Nothing answered and cached before a kill was ever requested again.
    for kill in kills:
        resent = {r.prompt for r in server.records[kill["records"]:]} & kill["cached"]
        assert not resent, f"{len(resent)} cached prompts re-sent after a {kill['kind']} kill"
    # A prompt answered twice was in flight (sent, not yet cached) at some kill; at most one
    # slot's worth per kill.
    answered = Counter(r.prompt for r in server.ok_records())
    assert set(answered) == ref_ok
    twice = {p for p, c in answered.items() if c > 1}
    assert twice <= set().union(*(k["lost"] for k in kills))
    assert sum(answered.values()) - len(answered) <= CONCURRENCY * len(kills)
    assert len(server.records) < 2000  # bounded traffic

    outcomes = outcomes_of(server)
    elapsed = time.monotonic() - began
    print(f"\nfaults (reference run): {dict(sorted(ref_outcomes.items()))}"
          f"\nfaults (killed runs):   {dict(sorted(outcomes.items()))}"
          f"\nkills survived: {len(kills)} {dict(Counter(k['kind'] for k in kills))}; "
          f"items {len(wanted)}, distinct requests {distinct}, answered twice {len(twice)}, "
          f"cache debris {kills[-1]['debris']} -> {len(debris)}; {elapsed:.1f}s")
