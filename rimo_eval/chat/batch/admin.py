"""``rimo-eval predict --batch-status`` / ``--batch-cancel``: the live batches of the cache
folder's records (``records``) of the backend's section (``predict.openai`` or
``predict.anthropic``), with their ids, the provider's state and request counts, and cancelling
them. A cancelled batch stays recorded: the next ``predict`` collects what it had answered into
the cache and asks the rest again (a follow-up batch)."""

from __future__ import annotations

import asyncio
from typing import Any

from rimo_eval.chat.batch.rounds import BatchRounds
from rimo_eval.errors import ConfigError, StageError


def make_batch_transport(params: Any, section: str) -> BatchRounds:
    """The batch transport of a backend's section (its SDK loads here, late)."""
    if section == "predict.anthropic":
        from rimo_eval.chat.batch.anthropic import AnthropicBatchTransport

        return AnthropicBatchTransport(params, section)
    from rimo_eval.chat.batch.openai import OpenAIBatchTransport

    return OpenAIBatchTransport(params, section)


def batch_admin(params: Any, section: str = "predict.openai", cancel: bool = False) -> str:
    if params is None or params.cache_dir is None:
        raise ConfigError(f"params.yaml: {section}.cache_dir holds the batch records; it is "
                          "not set")
    return asyncio.run(_admin(make_batch_transport(params, section), cancel))


async def _admin(transport: BatchRounds, cancel: bool) -> str:
    store = transport.records
    try:
        records = store.load()
    except ValueError as exc:
        raise StageError(f"{transport.section}.batch: {exc}") from None
    live = [r for r in records if r.open]
    if not live:
        await transport.aclose()
        return f"no live batches (records in {store.root})"
    lines = [f"{'batch':<28} {'round':>5} {'requests':>8}  state"]
    try:
        for record in live:
            ids = [record.batch_id] if record.batch_id else []
            if not ids:  # the create was not confirmed: the next run finds it
                ids = await transport.candidates(record, records)
                where = f"(file {record.file_id})" if record.file_id else "(not recorded)"
                lines.append(f"{where:<28} {record.round:>5} {len(record.keys):>8}  "
                             f"{record.state}, create not confirmed"
                             + (f"; candidates: {', '.join(ids)}" if ids else ""))
            for batch_id in ids:
                try:
                    polled = await (transport.cancel(batch_id) if cancel
                                    else transport.poll(batch_id))
                except Exception as exc:  # the provider refused: say which batch
                    raise StageError(transport.online._redact(
                        f"batch {batch_id}: {type(exc).__name__}: {exc}")[:400]) from None
                lines.append(f"{polled.batch_id:<28} {record.round:>5} {len(record.keys):>8}  "
                             f"{polled.status}{polled.counts}")
    finally:
        await transport.aclose()
    return "\n".join(lines)
