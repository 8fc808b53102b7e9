"""Two predicts on one response cache, as two ``dvc queue`` workers (issue 30 §1): one runs
from start to end while the other is killed with ``kill -9`` again and again and restarted.

The faulty server and items of ``test_predict_faults``; the server answers slowly (0.4 s) so
that the live worker is still sending at every kill. After each kill: the cache is whole (every
entry parses, under its key); nothing cached is requested again. At the end: both workers'
tables are byte for byte the same and equal an uninterrupted single run item by item; a request
was answered twice only if it was in flight at a kill (a killed worker's lease is taken over),
never because the two workers raced for it (before issue 30, nearly every request was sent by
both).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rimo_eval.io.atomic import PAUSE_ENV
from rimo_eval.predict import predict
from tests.support.chat_server import ChatServer
from tests.support.factories import predict_section, write_items
from tests.support.paths import REPO_ROOT
from tests.support.predict_faults import (
    CONCURRENCY,
    KEY_ENV,
    SEED,
    Stage,
    build_items,
    cache_state,
    file_bytes,
    openai_config,
    predict_cfg,
    predictions,
)

pytestmark = [pytest.mark.chat_server(latency_s=0.03, hang_s=3.0), pytest.mark.serial,
              pytest.mark.slow]
MAX_KILLS = 4
SLOW_S = 0.4  # the server's latency while the workers run


@pytest.fixture
def server(server: ChatServer) -> Iterator[ChatServer]:
    yield server
    while Stage.live:  # a failed test must not leave a predict process behind
        proc = Stage.live.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def worker(root: Path, name: str, server: ChatServer, cache_dir: Path,
           rows: tuple[list[dict], list[dict]]) -> tuple[Path, Path]:
    """A scratch project (its items, its params) sharing ``cache_dir``."""
    work = root / name
    write_items(work / "data" / "items", *rows)
    full = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    full["predict"] = predict_cfg(openai_config(server, cache_dir))
    params = work / "params.yaml"
    params.write_text(yaml.safe_dump(full))
    return work, params


def test_a_kill9_loop_on_one_worker_while_another_runs(server: ChatServer, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(PAUSE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    rows = build_items(random.Random(SEED))
    rng = random.Random(SEED + 30)

    # The reference: one uninterrupted run alone, in-process, with a cache of its own.
    ref_items = tmp_path / "ref" / "items"
    write_items(ref_items, *rows)
    predict(predict_section(predict_cfg(openai_config(server, tmp_path / "ref" / "cache"))),
            ref_items, tmp_path / "ref" / "preds")
    ref_preds = predictions(tmp_path / "ref" / "preds")
    ref_ok = {r.prompt for r in server.ok_records()}

    server.reset()
    server.latency_s = SLOW_S
    cache_dir = tmp_path / "cache"
    killed_dir, killed_params = worker(tmp_path, "killed", server, cache_dir, rows)
    live_dir, live_params = worker(tmp_path, "live", server, cache_dir, rows)
    live = Stage(live_dir, live_params, 0)
    kills: list[dict[str, Any]] = []
    index = 0
    while live.proc.poll() is None and len(kills) < MAX_KILLS:
        stage = Stage(killed_dir, killed_params, index := index + 1)
        # predict's first line names the items, k and the backend that run.
        stage.wait_until(lambda s=stage: ", backend openai (fingerprint" in s.text(), 60,
                         "its start")
        time.sleep(rng.uniform(0.2, 1.2))  # requests in flight, leases held on both sides
        if live.proc.poll() is not None:
            stage.kill()
            break
        stage.kill()
        time.sleep(0.05)  # a request still being read is recorded before the cut
        cached, debris = cache_state(cache_dir)
        assert not debris, debris
        assert cached <= {r.prompt for r in server.ok_records()}
        kills.append({"records": len(server.records), "cached": cached,
                      "lost": {r.prompt for r in server.records} - cached})
    assert len(kills) >= 2, "the live worker ended before two kills: too fast a machine?"
    assert live.proc.wait(timeout=120) == 0, live.text()[-3000:]
    final = Stage(killed_dir, killed_params, index + 1)
    assert final.proc.wait(timeout=120) == 0, final.text()[-3000:]

    assert predictions(live_dir / "data" / "predictions") == ref_preds
    assert predictions(killed_dir / "data" / "predictions") == ref_preds
    assert file_bytes(live_dir / "data" / "predictions") == file_bytes(
        killed_dir / "data" / "predictions")
    cached, debris = cache_state(cache_dir)
    assert cached == ref_ok and not debris
    for kill in kills:  # nothing stored before a kill was requested again
        resent = {r.prompt for r in server.records[kill["records"]:]} & kill["cached"]
        assert not resent, f"{len(resent)} cached prompts re-sent"
    answered = Counter(r.prompt for r in server.ok_records())
    twice = {p for p, c in answered.items() if c > 1}
    assert twice <= set().union(*(k["lost"] for k in kills)), "the two workers raced"
    assert sum(answered.values()) - len(answered) <= CONCURRENCY * len(kills)
    print(f"\n{len(kills)} kills beside a live worker; {len(answered)} distinct requests, "
          f"{sum(answered.values()) - len(answered)} answered twice")
