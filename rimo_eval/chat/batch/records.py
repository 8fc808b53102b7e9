"""Durable batch records: what makes a batch run resumable after a ``kill -9`` without paying
twice. One JSON file per batch under ``<cache_dir>/batches/`` (Anthropic's: ``.../anthropic/``),
written atomically with fsync (``rimo_eval.io.atomic``) at each step, so a kill leaves the
previous step's record or the next:

``uploading``  the request keys (and their cache payloads) chosen, before any upload (OpenAI);
``uploaded``   the uploaded input file's id, BEFORE ``batches.create`` (a kill between the create
               and the next write is found again by that file id: ``batches.list``);
``creating``   the keys, BEFORE the one create call of an API without an upload (Anthropic's
               Message Batches: a kill after it is found again by listing, see ``anthropic``);
``live``       the batch id: a restart polls this batch, never a second one for its keys;
``collected``  its replies are in the response cache (``status``: the provider's end state).

A record of a request key counts as one submission of it (``max_resubmits`` bounds them).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rimo_eval.io.atomic import write_json

FORMAT = 1
STATES = ("uploading", "uploaded", "creating", "live", "collected")


@dataclass
class BatchRecord:
    id: str
    round: int
    keys: dict[str, dict[str, Any]]  # cache key -> cache payload (endpoint, request, sample)
    state: str = "uploading"
    file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None  # the provider's last known state
    created: float = field(default_factory=time.time)
    format: int = FORMAT

    @property
    def submitted(self) -> bool:
        """The provider may hold a batch of these requests (so they count as submitted)."""
        return self.state in ("uploaded", "creating", "live", "collected")

    @property
    def open(self) -> bool:
        """Not yet collected, and the provider may hold it (what ``--batch-status`` lists)."""
        return self.state in ("uploaded", "creating", "live")


class RecordStore:
    """The records of one cache folder and provider (``root``: ``rounds.records_root``)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def lock(self) -> None:
        """Hold this folder's lock for the life of the process (the kernel drops it when the
        process dies, kill -9 included): two runs adopting the same records could each make a
        batch of one request, so the second one stops instead."""
        if getattr(self, "_lock_fd", None) is not None:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RuntimeError(f"{self.root}: another predict is sending batches from this "
                               "cache folder; wait for it (or use another cache_dir)") from None
        self._lock_fd: int | None = fd

    def unlock(self) -> None:
        fd, self._lock_fd = getattr(self, "_lock_fd", None), None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing drops the flock

    def path(self, record_id: str) -> Path:
        return self.root / f"{record_id}.json"

    def new(self, keys: dict[str, dict[str, Any]], round_: int, state: str = "uploading"
            ) -> BatchRecord:
        # Time first, so records list in creation order; random so two runs never collide.
        record = BatchRecord(f"{time.time_ns():020d}-{secrets.token_hex(4)}", round_, keys,
                             state)
        self.save(record)
        return record

    def save(self, record: BatchRecord) -> None:
        write_json(self.path(record.id), asdict(record))  # temp file, fsync, rename, fsync dir

    def drop(self, record: BatchRecord) -> None:
        self.path(record.id).unlink(missing_ok=True)

    def load(self) -> list[BatchRecord]:
        """Every readable record, oldest first. A record is only ever replaced whole, so an
        unreadable one is not ours (or another format): it is named, never guessed at."""
        records = []
        for path in sorted(self.root.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                record = BatchRecord(**data)
            except (OSError, ValueError, TypeError) as exc:
                raise ValueError(f"{path}: not a batch record ({exc})") from None
            if record.format != FORMAT or record.state not in STATES:
                raise ValueError(f"{path}: unknown batch record format or state")
            records.append(record)
        return records
