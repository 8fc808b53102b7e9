"""Judging a list of sub-solutions: one call each, verdicts parsed, the judge fingerprinted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rimo_eval import __version__
from rimo_eval.io.hashing import fingerprint
from rimo_eval.judge import chat, parse
from rimo_eval.judge.metrics import ERROR, MISSING
from rimo_eval.judge.prompt import PART_SEPARATOR, judge_messages, template_sha256
from rimo_eval.params.config import JudgeParams

PROTOCOL = "rimo-p-judge-v1"  # bump when the way a part becomes a judge call changes


@dataclass(frozen=True)
class Job:
    """Judge ``candidate`` as the solution of part ``index`` (0-based) of one item."""

    problem: str
    sub_solutions: tuple[str, ...]
    index: int
    candidate: str | None  # None or blank: missing, never sent


def identity(cfg: JudgeParams) -> dict[str, Any]:
    """Everything that decides a verdict; its sha256 is the judge fingerprint. No secrets."""
    return {"protocol": PROTOCOL, "judge": chat.endpoint_identity(cfg),
            "template_sha256": template_sha256(), "parser": parse.VERSION,
            "official_solution_separator": PART_SEPARATOR, "version": __version__}


def judge_fingerprint(cfg: JudgeParams) -> str:
    return fingerprint(identity(cfg))


def judge_jobs(cfg: JudgeParams, jobs: Sequence[Job], label: str = "judge"
               ) -> list[dict[str, Any]]:
    """One record per job, in order: verdict, reason, how it parsed, raw text, request hash."""
    sent = [j for j in jobs if j.candidate and j.candidate.strip()]
    conversations = [judge_messages(j.problem, j.sub_solutions, j.index, j.candidate or "",
                                    cfg.system_prompt) for j in sent]
    answers = iter(chat.ask_all(cfg, conversations, label) if sent else [])
    out = []
    for job in jobs:
        if not (job.candidate and job.candidate.strip()):
            out.append({"verdict": MISSING, "reason": "no candidate sub-solution (not sent)",
                        "parse": None, "raw_text": None, "request_sha256": None,
                        "error": None, "judge_model": None})
            continue
        answer = next(answers)
        if answer.error is not None:
            out.append({"verdict": ERROR, "reason": None, "parse": None, "raw_text": None,
                        "request_sha256": answer.request_sha256, "error": answer.error,
                        "judge_model": None})
            continue
        verdict = parse.parse_verdict(answer.text)
        out.append({"verdict": verdict.verdict, "reason": verdict.reason, "parse": verdict.how,
                    "raw_text": answer.raw_text, "request_sha256": answer.request_sha256,
                    "error": None, "judge_model": answer.model})
    return out
