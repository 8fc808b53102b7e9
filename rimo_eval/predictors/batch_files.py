"""``rimo-eval predict --export-batch FILE`` / ``--import-batch FILE``: the offline GPU path.
``vllm run-batch -i FILE -o OUT --model X`` (and other engines) read the OpenAI batch JSONL
with no server; this module writes the round's request file and reads the engine's output
file back into the response cache, under the keys an online run of the same params uses.

A round is every request whose earlier RIMO-P parts are cached: RIMO-N and first parts, then
second parts once the first are imported, and so on (at most 4 rounds). Import checks every
line before writing anything: a custom_id this round does not ask for, a repeated one, or a
line that is not a batch output line stops it naming the file and line; requests with no reply
(missing, or an error line) are reported and come back in the next export. A ``<think>`` block
in the content (vLLM's run-batch ignores the reasoning parser, vllm-project/vllm#26224) is
split off as online, by ``think_split`` when the reply is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from rimo_eval.artifacts.items import Item
from rimo_eval.chat import served
from rimo_eval.chat.batch.openai import ENDPOINT, batch_line
from rimo_eval.chat.cache import ResponseCache
from rimo_eval.chat.errors import MalformedResponse
from rimo_eval.chat.openai.replies import parse_completion
from rimo_eval.chat.session import lookup
from rimo_eval.errors import DataError, StageError
from rimo_eval.io.input_files import input_problem
from rimo_eval.io.outputs import claim_file, output_file
from rimo_eval.predictors.chat_predictor import ChatPredictor
from rimo_eval.predictors.prompting import rimo_n_messages, rimo_p_messages
from rimo_eval.predictors.reply_reading import read_reply
from rimo_eval.rimo.tracks import TRACK_N


def round_requests(predictor: ChatPredictor[Any], items: Sequence[Item]
                   ) -> dict[str, dict[str, Any]]:
    """The next round: cache key -> cache payload of every request not cached whose earlier
    parts are (the same walk as the protocol's, over the cache only)."""
    if predictor.params.cache_dir is None:
        raise StageError(f"{predictor.section}.cache_dir is null: batch files need the cache")
    transport = predictor.offline_transport()
    cache = ResponseCache(predictor.params.cache_dir)
    identity = served.recorded(cache, transport)  # the online run's keys: one cache, both ways
    system = predictor.params.system_prompt
    wanted: dict[str, dict[str, Any]] = {}
    for item in items:
        for sample in range(predictor.samples):
            if item.track == TRACK_N:
                key, payload, _, reply = lookup(cache, transport,
                                                rimo_n_messages(item, system), sample,
                                                identity)
                if reply is None:
                    wanted[key] = payload
                continue
            proved: list[str] = []
            for index in range(len(item.sub_problems)):
                messages = rimo_p_messages(item, index, proved, system)
                key, payload, _, reply = lookup(cache, transport, messages, sample,
                                                identity)
                if reply is None:
                    wanted[key] = payload
                    break
                proved.append(read_reply(reply, key, predictor.think_split()).text.strip())
    return wanted


EXPORT = ("predict", "predict --export-batch")  # the tool and option (io/outputs.py)
MAX_LINE = 1 << 26  # bytes of a request line: far above any prompt


def is_export(fh: BinaryIO) -> bool:
    """Whether an existing file is a request file export_batch wrote (its first line one of
    batch_line's: the only other files it may replace are empty)."""
    try:
        line = json.loads(fh.readline(MAX_LINE))
    except ValueError:
        return False
    return (isinstance(line, dict) and sorted(line) == ["body", "custom_id", "method", "url"]
            and line["url"] == ENDPOINT and isinstance(line["custom_id"], str)
            and re.fullmatch(r"[0-9a-f]{64}", line["custom_id"]) is not None)


def export_batch(predictor: ChatPredictor[Any], items: Sequence[Item], path: Path) -> str:
    claim_file(path, *EXPORT, is_export)  # refused before the cache is read
    wanted = round_requests(predictor, items)
    with output_file(path, *EXPORT, is_export) as tmp:
        tmp.write_bytes(b"".join(batch_line(k, wanted[k]["request"]) for k in sorted(wanted)))
    if not wanted:
        return f"{path}: 0 requests: every reply is cached; run predict"
    return (f"{path}: {len(wanted)} requests; run e.g. `vllm run-batch -i {path} -o OUT "
            f"--model MODEL`, then `rimo-eval predict --import-batch OUT`")


def import_batch(predictor: ChatPredictor[Any], items: Sequence[Item], path: Path) -> str:
    problem = input_problem(str(path))  # a FIFO would hang the read
    if problem:
        raise DataError(f"predict --import-batch: {problem}")
    wanted = round_requests(predictor, items)
    try:
        raw = path.read_bytes().splitlines()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the batch output file: {exc}") from None
    replies: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for number, text in enumerate(raw, 1):
        if not text.strip():
            continue
        where = f"{path}:{number}"
        try:
            line = json.loads(text)
            cid = line["custom_id"]
        except (ValueError, KeyError, TypeError):
            raise DataError(f"{where}: not a batch output line (JSON with custom_id)") from None
        if cid not in wanted:
            raise DataError(f"{where}: custom_id {str(cid)[:80]!r} is not a request of this "
                            "round (another params file, model or round, or already imported)")
        if cid in replies or cid in failed:
            raise DataError(f"{where}: custom_id {cid} appears twice")
        response = line.get("response") if isinstance(line, dict) else None
        if not isinstance(response, dict) or response.get("status_code") != 200:
            failed[cid] = str(line.get("error") or (response or {}).get("status_code"))[:200]
            continue
        try:
            reply = parse_completion(response.get("body"), 0.0)
        except MalformedResponse as exc:
            raise DataError(f"{where}: custom_id {cid}: {exc}") from None
        replies[cid] = reply
    cache = ResponseCache(predictor.params.cache_dir)
    for cid, reply in replies.items():  # every line checked: now write
        cache.put(cid, wanted[cid], reply.to_json())
    cache.sync()
    missing = len(wanted) - len(replies) - len(failed)
    return (f"{path}: imported {len(replies)} of {len(wanted)} requests of this round; "
            f"{len(failed)} error lines, {missing} missing (both come back in the next "
            "--export-batch)")
