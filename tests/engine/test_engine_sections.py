"""Errors name the params section that is running (issue 17 §3): the judge's rejected
parameter and its breaker trip name ``judge.*``, not ``predict.openai.*``; a typed section
refuses a bad value with its key path (``predict.local.model_cache_dir: null``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rimo_eval.errors import ConfigError, StageError
from rimo_eval.judge.stage import judge
from rimo_eval.params.config import parse_params, read_yaml
from tests.support.chat_server import ChatServer
from tests.support.factories import n_item, p_item, params, write_items
from tests.support.judge_setup import KEY_ENV, judge_cfg, judge_paths, scored
from tests.support.paths import REPO_ROOT


@pytest.fixture
def server() -> Iterator[ChatServer]:
    srv = ChatServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-sections")
    write_items(tmp_path / "data/items", [n_item("2001a1", "1")],
                [p_item(f"p{i}", [f"proof {i}.{k}" for k in range(2)]) for i in range(6)])
    scored(tmp_path, {"backend": "oracle", "limit": None})
    return tmp_path


def test_a_judge_whose_server_rejects_max_tokens_names_judge_max_tokens(
        server: ChatServer, project: Path) -> None:
    server.reasoning_model = True  # 400 naming 'max_tokens', as OpenAI's o-series send it
    cfg = judge_cfg(server, project, max_tokens=64, temperature=None)
    with pytest.raises(StageError) as info:
        judge(params(judge=cfg), **judge_paths(project))
    message = str(info.value)
    assert "change or null judge.max_tokens" in message
    assert "predict" not in message


def test_a_judge_breaker_trip_names_the_judge_and_its_window(
        server: ChatServer, project: Path) -> None:
    server.fail_all = 503
    cfg = judge_cfg(server, project, breaker_window=3, max_retries=0, concurrency=1)
    with pytest.raises(StageError) as info:
        judge(params(judge=cfg), **judge_paths(project))
    message = str(info.value)
    assert message.startswith("judge: the last 3 requests all failed")
    assert "(judge.breaker_window = 3)" in message and "predict" not in message


@pytest.mark.parametrize(("key", "value", "want"), [
    ("model_cache_dir", None, "predict.local.model_cache_dir: Input should be a valid string"),
    ("model_cache_dir", "", "predict.local.model_cache_dir: String should have at least 1"),
    ("n_ctx", 0, "predict.local.n_ctx: Input should be greater than or equal to 1"),
])
def test_a_bad_local_value_is_refused_with_its_key_path(key: str, value: object,
                                                        want: str) -> None:
    data = read_yaml(REPO_ROOT / "params.yaml")
    data["predict"]["local"][key] = value
    with pytest.raises(ConfigError, match=want):
        parse_params(data)


@pytest.mark.parametrize(("section", "value", "want"), [
    ("openai", "ftp://x/v1", "predict.openai.base_url: 'ftp://x/v1' is not an http(s) URL"),
    ("openai", "http://u:pw@h/v1", "predict.openai.base_url: must not carry credentials"),
    ("judge", "http://h/v1?key=1", "judge.base_url: must not carry credentials"),
])
def test_a_bad_base_url_is_refused_once_by_the_typed_section(section: str, value: str,
                                                             want: str) -> None:
    data = read_yaml(REPO_ROOT / "params.yaml")
    (data["predict"]["openai"] if section == "openai" else data["judge"])["base_url"] = value
    with pytest.raises(ConfigError, match=re.escape(want)):
        parse_params(data)


def test_the_judge_draws_one_progress_bar_of_its_parts(
        server: ChatServer, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 17 §10: the judge used to open a stray empty bar before its own."""
    from rimo_eval.chat import session
    from tests.support.judge_setup import hashed_reply

    totals: list[int] = []

    class Counted(session.Progress):
        def __init__(self, total: int, label: str, stall_warning_s: float | None) -> None:
            totals.append(total)
            super().__init__(total, label, stall_warning_s)

    monkeypatch.setattr(session, "Progress", Counted)
    server.responder = hashed_reply
    judge(params(judge=judge_cfg(server, project)), **judge_paths(project))
    assert totals == [12]  # 6 items x 2 parts, one bar
