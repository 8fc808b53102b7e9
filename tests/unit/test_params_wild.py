"""Params that used to pass validation and then fail deep in a run, or be dropped silently
(issue 28 §3). Each is refused when the file is read, naming its key path (or its file and
lines), before any stage does anything, and the CLI says it without a traceback."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rimo_eval.errors import ConfigError
from rimo_eval.params.config import load_params, parse_params
from rimo_eval.validate.errata import load_errata
from tests.support.paths import REPO_ROOT
from tests.support.pipeline_repo import BIN, sh

PARAMS_TEXT = (REPO_ROOT / "params.yaml").read_text(encoding="utf-8")
PARAMS = yaml.safe_load(PARAMS_TEXT)
# Every float parameter of a sampling endpoint: predict's backends and the judge.
SAMPLING = [*(f"{s}.{k}" for s in ("predict.openai", "predict.anthropic", "predict.gemini",
                                   "judge") for k in ("temperature", "top_p")),
            "predict.local.temperature"]


def with_value(dotted: str | tuple[str, ...], value: Any, data: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """The params with one value set; a tuple names a key that holds a dot (fetch.sha256)."""
    out = copy.deepcopy(PARAMS if data is None else data)
    *parents, key = dotted.split(".") if isinstance(dotted, str) else dotted
    node = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(key)] = value
    else:
        node[key] = value
    return out


def refused(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as err:
        parse_params(data, "exp.yaml")
    return str(err.value)


def refused_file(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load_params(path)
    return str(err.value)


def leaves(data: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from leaves(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from leaves(value, (*path, str(index)))
    else:
        yield path, data


NUMBERS = [k for k, v in leaves(PARAMS) if isinstance(v, int | float) and not isinstance(v, bool)]
STRINGS = [k for k, v in leaves(PARAMS) if isinstance(v, str)]
NAMED = ["predict.openai.model", "predict.openai.system_prompt", "predict.anthropic.system_prompt",
         "predict.gemini.model", "predict.local.system_prompt", "judge.model"]


# --- NaN and infinities ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", ".NaN", "+.Inf"])
@pytest.mark.parametrize("key", SAMPLING)
def test_a_sampling_param_set_to_nan_or_inf_is_refused(tmp_path: Path, key: str,
                                                      value: str) -> None:
    """As YAML spells them: before, they passed and the first request failed with "Out of
    range float values are not JSON compliant"."""
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(with_value(key, "@@"), sort_keys=False)
                    .replace("'@@'", value), encoding="utf-8")
    got = float(value.lstrip("+").replace(".", ""))
    assert refused_file(path) == f"{path}: {key}: must be a finite number (got {got!r})"


@pytest.mark.parametrize("key", NUMBERS, ids=".".join)
def test_every_number_of_the_file_refuses_nan(key: tuple[str, ...]) -> None:
    assert f"exp.yaml: {'.'.join(key)}: must be a finite number (got nan)" in refused(
        with_value(key, math.nan))


@pytest.mark.parametrize("key", ["predict.anthropic.thinking", "predict.gemini.thinking_config",
                                 "predict.openai.extra_body", "judge.extra_body"])
def test_a_free_form_mapping_refuses_inf_inside_it(key: str) -> None:
    """Passed through to the API as written: the key path goes down into the mapping."""
    message = refused(with_value(key, {"budget": {"tokens": math.inf}}))
    assert f"exp.yaml: {key}.budget.tokens: must be a finite number (got inf)" in (
        message.splitlines())


def test_the_cli_names_the_key_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(with_value("judge.top_p", math.nan)), encoding="utf-8")
    proc = sh(tmp_path, str(BIN / "rimo-eval"), "--params", str(path), "judge", check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f"rimo-eval judge: error: {path}: judge.top_p: must be a finite "
                           f"number (got nan)\n")


# --- lone surrogates ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", [*STRINGS, *(tuple(k.split(".")) for k in NAMED)],
                         ids=".".join)
def test_a_lone_surrogate_in_any_string_is_refused(key: tuple[str, ...]) -> None:
    message = refused(with_value(key, "ab\ud800c"))
    assert message.startswith(f"exp.yaml: {'.'.join(key)}: the text holds a lone UTF-16 surrogate "
                              f"\\ud800 at character 2"), message
    message.encode("utf-8")  # the message itself prints anywhere


def test_a_lone_surrogate_in_a_key_is_refused() -> None:
    message = refused(with_value("predict.openai.extra_body", {"x\udfffy": 1}))
    assert message.startswith("exp.yaml: predict.openai.extra_body.x\\udfffy: the key holds a "
                              "lone UTF-16 surrogate \\udfff at character 1")


def test_the_yaml_escape_is_refused_with_how_to_write_the_character(tmp_path: Path) -> None:
    """YAML's \\u escapes are code points: a UTF-16 pair is two lone surrogates, not one emoji."""
    path = tmp_path / "exp.yaml"
    path.write_text(PARAMS_TEXT.replace(
        "  system_prompt: You are an expert mathematician",
        '  system_prompt: "\\ud83d\\ude00 You are an expert mathematician'
    ).replace("strict judge of proofs.\n", 'strict judge of proofs."\n'), encoding="utf-8")
    message = refused_file(path)
    assert message.startswith(f"{path}: judge.system_prompt: the text holds a lone UTF-16 "
                              "surrogate \\ud83d at character 0")
    assert "write \\U0001F600" in message
    fixed = path.read_text(encoding="utf-8").replace("\\ud83d\\ude00", "\\U0001F600")
    path.write_text(fixed, encoding="utf-8")
    assert load_params(path).judge.system_prompt.startswith("\U0001f600 You are")


def test_the_cli_prints_a_surrogate_escaped(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(with_value("predict.constant.answer", "\ud800"),
                                   allow_unicode=False), encoding="utf-8")
    proc = sh(tmp_path, str(BIN / "rimo-eval"), "--params", str(path), "predict", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{path}: predict.constant.answer: the text holds a lone UTF-16 surrogate " \
           f"\\ud800 at character 0" in proc.stderr


# --- a key given twice -------------------------------------------------------------------------


def line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


@pytest.mark.parametrize(("needle", "again", "key"), [
    ("  limit: 5", "  limit: 7", "predict.limit"),
    ("    temperature: 0.0 ", "    temperature: 0.7", "predict.openai.temperature"),
    ("    seed: 0", "    seed: 1", "predict.local.seed"),
])
def test_a_key_given_twice_is_refused_with_both_lines(tmp_path: Path, needle: str, again: str,
                                                      key: str) -> None:
    """Before, the last copy won silently: two limit lines under predict ran with the second."""
    lines = PARAMS_TEXT.splitlines(keepends=True)
    first = next(n for n, line in enumerate(lines, start=1) if line.startswith(needle))
    lines.insert(first, again + "\n")  # the next line: first + 1
    path = tmp_path / "exp.yaml"
    path.write_text("".join(lines), encoding="utf-8")
    assert refused_file(path) == (
        f"{path}:{first + 1}: {key}: key given twice (first at line {first}); YAML would keep "
        f"only the last copy: delete one")


def test_a_section_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(PARAMS_TEXT + "report:\n  worst_failures: 3\n", encoding="utf-8")
    first = PARAMS_TEXT.splitlines().index("report:") + 1
    second = len(PARAMS_TEXT.splitlines()) + 1
    assert refused_file(path) == (
        f"{path}:{second}: report: key given twice (first at line {first}); YAML would keep "
        f"only the last copy: delete one")


def test_every_repeat_is_named_flow_mappings_and_lists_too(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(PARAMS_TEXT.replace(
        'think_split: {enabled: true, open: "<think>"',
        'think_split: {enabled: true, open: "<think>", enabled: false'
    ).replace("  mirrors:\n    - ../shared/rimo/upstream\n",
              "  mirrors:\n    - {a: 1, a: 2}\n"), encoding="utf-8")
    lines = refused_file(path).splitlines()
    mirror, think = line_of(PARAMS_TEXT, "    - ../shared"), line_of(PARAMS_TEXT, "think_split:")
    assert lines == [
        f"{path}:{mirror}: fetch.mirrors.0.a: key given twice (first at line {mirror}); YAML "
        f"would keep only the last copy: delete one",
        f"{path}:{think}: predict.openai.think_split.enabled: key given twice (first at line "
        f"{think}); YAML would keep only the last copy: delete one"]


def test_a_merge_key_may_still_be_overridden() -> None:
    """``<<: *anchor`` then an explicit key is how YAML overrides a merged one: no repeat."""
    from rimo_eval.params.yaml_file import DuplicateKeyError, load_unique

    text = "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  x: 3\n"
    assert load_unique(text, "f.yaml") == {"base": {"x": 1, "y": 2}, "other": {"x": 3, "y": 2}}
    with pytest.raises(DuplicateKeyError, match=r"^f\.yaml:4: other\.x: key given twice \("
                                                r"first at line 3\)"):
        load_unique("base: &b {x: 1}\nother:\n  x: 2\n  x: 3\n  <<: *b\n", "f.yaml")


def test_params_option_refuses_a_repeat_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "other.yaml"
    path.write_text("fetch: {}\nfetch: {}\n", encoding="utf-8")
    for args in (["--params", str(path), "check-params"], ["score", "--params", str(path)]):
        proc = sh(tmp_path, str(BIN / "rimo-eval"), *args, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert (f"error: {path}:2: fetch: key given twice (first at line 1); YAML would keep "
                f"only the last copy: delete one") in proc.stderr


def test_an_errata_entry_with_a_key_twice_is_refused(tmp_path: Path) -> None:
    text = (REPO_ROOT / "data/errata.yaml").read_text(encoding="utf-8")
    first = re.search(r"^    action: .*$", text, re.M)
    assert first
    path = tmp_path / "errata.yaml"
    path.write_text(text[:first.end()] + "\n    action: drop" + text[first.end():],
                    encoding="utf-8")
    line = text[:first.start()].count("\n") + 1
    with pytest.raises(ConfigError, match=re.escape(
            f"{path}:{line + 1}: errata.0.action: key given twice (first at line {line})")):
        load_errata(path)


# --- unknown keys: the nearest known one -------------------------------------------------------


@pytest.mark.parametrize(("where", "key", "meant"), [
    ("predict", "limt", "`predict.limit`"),
    ("", "predcit", "`predict`"),
    ("", "validat", "`validate`"),
    ("predict.openai", "temprature", "`predict.openai.temperature`"),
    ("predict.openai.batch", "enabeld", "`predict.openai.batch.enabled`"),
    ("predict.openai.think_split", "opne", "`predict.openai.think_split.open`"),
    ("score.bootstrap", "sample", "`score.bootstrap.samples`"),
    ("judge.calibration", "limt", "`judge.calibration.limit`"),
    ("predict", "lokal", "`predict.local`"),
    ("predict.anthropic", "thinkng", "`predict.anthropic.thinking`"),
    # The right name in the wrong section: where it does belong.
    ("predict", "temperature", "`predict.local.temperature` or `predict.openai.temperature` or "
                               "`predict.anthropic.temperature`"),
    ("score", "seed", "`score.bootstrap.seed`"),
])
def test_an_unknown_key_names_the_nearest_known_one(where: str, key: str, meant: str) -> None:
    data = copy.deepcopy(PARAMS)
    node = data
    for part in filter(None, where.split(".")):
        node = node[part]
    node[key] = 3
    dotted = f"{where}.{key}" if where else key
    assert f"exp.yaml: {dotted}: unknown key; did you mean {meant}?" in refused(data).splitlines()


def test_an_unknown_key_like_nothing_known_is_just_unknown() -> None:
    assert refused(with_value("judge.qqqq", 1)) == "exp.yaml: judge.qqqq: unknown key"
    assert refused(with_value("predict.qqqq", {})) == (
        "exp.yaml: predict.qqqq: unknown key (not a backend registered in rimo_eval.predictors)")


# --- cache folders -----------------------------------------------------------------------------

CACHE_KEYS = ["predict.openai.cache_dir", "predict.anthropic.cache_dir",
              "predict.gemini.cache_dir", "predict.local.cache_dir",
              "predict.local.model_cache_dir", "judge.cache_dir"]


@pytest.mark.parametrize("key", CACHE_KEYS)
def test_a_cache_dir_naming_a_file_is_refused(tmp_path: Path, key: str) -> None:
    """Before: a FileExistsError traceback from the first mkdir, deep in predict or judge."""
    file = tmp_path / "notes.txt"
    file.write_text("a file\n", encoding="utf-8")
    assert refused(with_value(key, str(file))) == (
        f"exp.yaml: {key}: names a file, not a folder: {file}")
    assert refused(with_value(key, str(file / "responses"))) == (
        f"exp.yaml: {key}: cannot be a folder: {file} is a file")
    parse_params(with_value(key, str(tmp_path / "new" / "folder")), "exp.yaml")  # made later


def test_a_relative_cache_dir_is_checked_where_the_stage_puts_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `dvc exp run --temp` a relative cache folder is the main workspace's (DVC_ROOT)."""
    (tmp_path / "cache").write_text("", encoding="utf-8")
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    assert refused(with_value("judge.cache_dir", "cache")) == (
        f"exp.yaml: judge.cache_dir: names a file, not a folder: {tmp_path / 'cache'}")
    assert refused(with_value("judge.cache_dir", "")) == (
        "exp.yaml: judge.cache_dir: must name a folder (null: none)")


def test_predict_with_a_cache_dir_that_is_a_file_fails_without_a_traceback(
        tmp_path: Path) -> None:
    (tmp_path / "responses").write_text("", encoding="utf-8")
    data = with_value("predict.backend", "openai")
    data = with_value("predict.openai.model", "m", data)
    data = with_value("predict.openai.cache_dir", "responses", data)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    proc = sh(tmp_path, str(BIN / "rimo-eval"), "--params", str(path), "predict", check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f"rimo-eval predict: error: {path}: predict.openai.cache_dir: names "
                           f"a file, not a folder: responses\n")


def test_a_yaml_syntax_error_still_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(PARAMS_TEXT + "  : [\n", encoding="utf-8")
    message = refused_file(path)
    assert message.startswith(f"{path}: invalid YAML: ") and f'in "{path}", line ' in message


# --- any text, any float -------------------------------------------------------------------------


# Any code point, lone surrogates included (hypothesis' text() leaves them out).
ANY_TEXT = st.lists(st.one_of(st.characters(), st.characters(categories=["Cs"])),
                    max_size=12).map("".join)


@settings(max_examples=100, deadline=None)
@given(text=ANY_TEXT,
       key=st.sampled_from(["predict.openai.system_prompt", "judge.model",
                            "predict.constant.answer", "predict.gemini.system_prompt"]))
def test_any_text_is_kept_exactly_or_refused_by_its_key(text: str, key: str) -> None:
    """Text that UTF-8 can hold is kept as written; anything else is refused naming the key,
    and never crashes a run later."""
    data = with_value(key, text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        message = refused(data)
        assert message.startswith(f"exp.yaml: {key}: the text holds a lone UTF-16 surrogate")
        message.encode("utf-8")
        return
    section, _, name = key.rpartition(".")
    node: Any = parse_params(data, "exp.yaml").as_dict()
    for part in section.split("."):
        node = node[part]
    assert node[name] == text


@settings(max_examples=100, deadline=None)
@given(value=st.floats(allow_nan=True, allow_infinity=True),
       key=st.sampled_from(["predict.openai.top_p", "predict.gemini.temperature", "judge.top_p"]))
def test_any_float_is_kept_if_finite_else_refused(value: float, key: str) -> None:
    data = with_value(key, value)
    if math.isfinite(value):
        parse_params(data, "exp.yaml")  # these keys have no range: any finite number passes
    else:
        assert refused(data) == f"exp.yaml: {key}: must be a finite number (got {value!r})"
