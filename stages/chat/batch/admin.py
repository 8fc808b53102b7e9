"""``rimo-eval predict --batch-status`` / ``--batch-cancel``: the live batches of the cache
folder's records (``records``), with their ids, the provider's state and request counts, and
cancelling them. A cancelled batch stays recorded: the next ``predict`` collects what it had
answered into the cache and asks the rest again (a follow-up batch)."""

from __future__ import annotations

import asyncio

from stages.chat.batch.records import RecordStore
from stages.chat.batch.transport import make_client, records_root
from stages.chat.openai.transport import OPENAI_BASE_URL
from stages.core.config import OpenAIParams
from stages.core.errors import ConfigError, StageError

SECTION = "predict.openai"


def batch_admin(params: OpenAIParams | None, cancel: bool = False) -> str:
    if params is None or params.cache_dir is None:
        raise ConfigError(f"params.yaml: {SECTION}.cache_dir holds the batch records; it is "
                          "not set")
    return asyncio.run(_admin(params, cancel))


async def _admin(params: OpenAIParams, cancel: bool) -> str:
    assert params.cache_dir is not None
    store = RecordStore(records_root(params.cache_dir))
    live = store.live()
    if not live:
        return f"no live batches (records in {store.root})"
    client = make_client(params, SECTION, (params.base_url or OPENAI_BASE_URL).rstrip("/"))
    lines = [f"{'batch':<28} {'round':>5} {'requests':>8}  state"]
    try:
        for record in live:
            if record.batch_id is None:  # uploaded, create not confirmed: found on next run
                lines.append(f"{'(file ' + str(record.file_id) + ')':<28} {record.round:>5} "
                             f"{len(record.keys):>8}  uploaded, not yet created")
                continue
            try:
                batch = await (client.batches.cancel(record.batch_id) if cancel
                               else client.batches.retrieve(record.batch_id))
            except Exception as exc:  # the provider refused: say which batch
                raise StageError(f"batch {record.batch_id}: {type(exc).__name__}: {exc}"
                                 [:400]) from None
            counts = batch.request_counts
            done = (f", {counts.completed}/{counts.total} done, {counts.failed} failed"
                    if counts else "")
            lines.append(f"{batch.id:<28} {record.round:>5} {len(record.keys):>8}  "
                         f"{batch.status}{done}")
    finally:
        await client.close()
    return "\n".join(lines)
