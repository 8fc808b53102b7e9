"""reports/judge.json on disk: numbers only, so it is a DVC metrics file that ``dvc exp show`` and
``dvc metrics show`` can list (no bare ``enabled`` flag, no judge-model string, no note).

The judge stage works with a nested record (``enabled``, ``note``, ``RIMO-P.judge`` with its
``ci`` block, ``model`` and ``fingerprint``); :func:`to_file` lays it out with each interval flat
beside its metric and the non-numeric facts in a one-element list under ``run``, a type DVC's
metrics commands skip (as metrics.json's provenance pointer). :func:`read` turns either layout,
old files included, back into the nested record. The report reads judge.json through it
without importing the judge stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rimo_eval.rimo.tracks import TRACK_P

RUN_KEY = "run"
FACTS = ("model", "fingerprint")  # strings of the judge block, kept out of the metrics
LOW, HIGH = "_ci_low", "_ci_high"


def to_file(record: Mapping[str, Any]) -> dict[str, Any]:
    """The nested record -> judge.json's layout (numbers, plus the ``run`` list)."""
    run: dict[str, Any] = {"enabled": bool(record.get("enabled"))}
    out: dict[str, Any] = {}
    block = (record.get(TRACK_P) or {}).get("judge")
    if record.get("enabled") and isinstance(block, Mapping):
        ci = block.get("ci") or {}
        flat: dict[str, Any] = {}
        for key, value in block.items():
            if key == "ci":
                continue
            if key in FACTS:
                run[key] = value
                continue
            flat[key] = value
            if isinstance(ci.get(key), Mapping):
                flat[key + LOW], flat[key + HIGH] = ci[key].get("low"), ci[key].get("high")
        out[TRACK_P] = {"judge": flat}
    if record.get("note"):
        run["note"] = record["note"]
    out[RUN_KEY] = [run]
    return out


def read(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """judge.json (either layout) -> the nested record; an empty or absent file: disabled."""
    if not isinstance(data, Mapping):
        return {"enabled": False}
    runs = data.get(RUN_KEY)
    if not (isinstance(runs, list) and runs and isinstance(runs[0], Mapping)):
        return dict(data)  # written before the numbers-only layout: already nested
    run = dict(runs[0])
    record: dict[str, Any] = {"enabled": bool(run.get("enabled"))}
    flat = (data.get(TRACK_P) or {}).get("judge")
    if record["enabled"] and isinstance(flat, Mapping):
        block: dict[str, Any] = {}
        ci: dict[str, dict[str, Any]] = {}
        for key, value in flat.items():
            for suffix, end in ((LOW, "low"), (HIGH, "high")):
                if key.endswith(suffix):
                    ci.setdefault(key[:-len(suffix)], {})[end] = value
                    break
            else:
                block[key] = value
        block.update({k: run[k] for k in FACTS if k in run})
        block["ci"] = ci
        record[TRACK_P] = {"judge": block}
    if "note" in run:
        record["note"] = run["note"]
    return record


__all__ = ["RUN_KEY", "read", "to_file"]
