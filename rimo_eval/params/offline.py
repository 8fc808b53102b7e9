"""The sections of the backends that call no model: constant, replay and oracle."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from rimo_eval.io.input_files import check_input
from rimo_eval.params.effects import Content, Result
from rimo_eval.params.section import Section


class ConstantParams(Section):
    answer: Result[str] = "0"
    solution: Result[str] = ""


# How predict.replay.path is read: "auto" tells each file's format from its content.
REPLAY_FORMATS = ("auto", "rimo", "csv", "inspect_ai", "lm_eval", "every_eval_ever")


class ReplayParams(Section):
    path: Content[Annotated[str, Field(min_length=1)]]
    format: Result[Literal["auto", "rimo", "csv", "inspect_ai", "lm_eval",
                           "every_eval_ever"]] = "auto"

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        check_input(value, folder=True)  # a file, or a folder of .jsonl and .csv
        return value


class OracleParams(Section):
    pass
