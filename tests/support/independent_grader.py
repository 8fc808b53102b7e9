"""An independent grader for the end-to-end tests: RIMO's rules re-implemented straight from the
upstream files, sharing no project code."""

from __future__ import annotations

import csv
import json
from pathlib import Path


def independent_gold(mirror: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The rules re-implemented straight from the upstream files, sharing no project code.

    RIMO-N gold is the CSV answer (what the upstream scripts read; it carries the 2023c2 fix).
    RIMO-P items are gradable when every one of their parts has a reference sub-solution.
    """
    with open(mirror / "RIMO-N.csv", encoding="utf-8", newline="") as fh:
        gold_n = {r["problem_id"]: r["answer"].strip() for r in csv.DictReader(fh)}
    gold_p = {}
    for line in (mirror / "RIMO-P.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        n = int(row["number_of_parts"])
        subs = [row[f"sub-solution{k}"] for k in range(1, n + 1)]
        if all(s and s.strip() for s in subs):
            gold_p[row["problem_id"]] = [s.strip() for s in subs]
    return gold_n, gold_p


def independent_metrics(gold_n: dict[str, str], gold_p: dict[str, list[str]],
                        pred_n: dict[str, str], pred_p: dict[str, list[str]]) -> dict:
    acc = sum(pred_n.get(i, "\0").strip() == g for i, g in gold_n.items()) / len(gold_n)
    strict = matched = parts = prefix = 0.0
    for pid, gold in gold_p.items():
        pred = pred_p.get(pid, [])
        ok = [k < len(pred) and pred[k].strip() == gold[k] for k in range(len(gold))]
        strict += len(pred) == len(gold) and all(ok)
        matched += sum(ok)
        parts += len(gold)
        lead = next((k for k, v in enumerate(ok) if not v), len(ok))
        prefix += lead / len(gold)
    return {"accuracy": acc, "strict": strict / len(gold_p), "sub": matched / parts,
            "prefix": prefix / len(gold_p)}
