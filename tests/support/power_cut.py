"""A power cut simulated from a traced run: what a file holds afterwards is what was written
to it up to its last ``fsync``, plus any part of what was written since (the kernel may or may
not have written a page back when the machine stopped, in any order).

The child runs under ``strace`` (``-y`` names the file of each descriptor, ``-e write=all``
dumps the bytes of each write), so SQLite's own writes are seen as they are, with no change to
the child and no ``LD_PRELOAD``. ``states`` then rebuilds the files as a power cut after any
syscall could leave them: every write, truncation and unlink up to the file's last sync before
the cut applied, each later one applied or dropped at random."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_CALL = re.compile(r"^(?:\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+)")
_FD = re.compile(r"^\d+<([^>]*)>")
_DUMP = re.compile(r"^(?:\d+\s+)? \| [0-9a-f]{5}  ")


@dataclass
class Op:
    kind: str  # write | truncate | unlink | sync
    name: str  # the file's name in the folder
    offset: int = 0
    data: bytes = b""


def traced(folder: Path, argv: list[str], **kwargs: object) -> list[Op]:
    """Run ``argv`` under strace; the writes, truncations, unlinks and syncs of the files
    directly in ``folder``, in order."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed: no power cut can be simulated")
    log = folder.parent / f"{folder.name}.strace"
    done = subprocess.run(["strace", "-f", "-qq", "-y", "-s", "0", "-e", "signal=none",
                           "-e", "trace=pwrite64,write,ftruncate,fsync,fdatasync,unlink,"
                           "unlinkat", "-e", "write=all", "-o", str(log), *argv],
                          capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        if "ptrace" in done.stderr or "Operation not permitted" in done.stderr:
            pytest.skip(f"strace cannot trace here: {done.stderr.strip()[:200]}")
        raise AssertionError(f"the traced run failed: {done.stderr[-2000:]}")
    ops = list(_parse(log.read_text(errors="replace").splitlines(), folder.resolve()))
    log.unlink()
    return ops


def _parse(lines: list[str], folder: Path) -> Iterator[Op]:
    pending: Op | None = None
    for line in lines:
        if _DUMP.match(line):
            if pending is not None:
                hexes = line.split(" | ", 1)[1][7:56]
                pending.data += bytes.fromhex(hexes.replace(" ", ""))
            continue
        if pending is not None:
            yield pending
            pending = None
        call = _CALL.match(line)
        if call is None or int(call.group(3)) < 0:
            continue
        name, args = call.group(1), call.group(2)
        if name in ("unlink", "unlinkat"):
            path = Path(re.findall(r'"([^"]*)"', args)[-1])
            if path.parent == folder:
                yield Op("unlink", path.name)
            continue
        fd = _FD.match(args)
        if fd is None or Path(fd.group(1)).parent != folder:
            continue
        file = Path(fd.group(1)).name
        rest = args.split(", ")
        if name == "pwrite64":
            pending = Op("write", file, int(rest[-1]))
        elif name == "write":
            raise AssertionError(f"a write without an offset to {file}: not modelled")
        elif name == "ftruncate":
            yield Op("truncate", file, int(rest[-1]))
        else:
            yield Op("sync", file)
    if pending is not None:
        yield pending


def states(before: dict[str, bytes], ops: list[Op], cuts: list[int],
           rng: random.Random) -> Iterator[tuple[int, dict[str, bytes]]]:
    """For each cut (a number of ops done), the files a power cut then could leave."""
    for cut in cuts:
        done = ops[:cut]
        last_sync = {op.name: i for i, op in enumerate(done) if op.kind == "sync"}
        files = {k: bytearray(v) for k, v in before.items()}
        for i, op in enumerate(done):
            if op.kind == "sync" or (i > last_sync.get(op.name, -1) and rng.random() < 0.5):
                continue  # (unsynced: dropped)
            if op.kind == "unlink":
                files.pop(op.name, None)
            elif op.kind == "truncate":
                files[op.name] = files.get(op.name, bytearray())[:op.offset]
            else:
                data = files.setdefault(op.name, bytearray())
                if len(data) < op.offset:
                    data.extend(bytes(op.offset - len(data)))
                data[op.offset:op.offset + len(op.data)] = op.data
        yield cut, {k: bytes(v) for k, v in files.items()}
