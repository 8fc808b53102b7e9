"""Two real pipeline runs for the browser tests: replay experiments over all 791 items.

``dvc exp run ... score`` in a temporary git + DVC repo (fetch from the shared mirror,
validate, replay predict, score), then the real ``rimo-eval view`` CLI. Run A carries the
hostile corpus: RIMO-N predictions and RIMO-P proofs holding scripts, handlers, javascript:
and data: URLs, iframes, SVG, CSS, KaTeX ``\\href``/``\\url`` and template syntax, each of
which would set ``window.__pwned`` or call a dialog if it ever ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from rimo_eval.rimo.tracks import TRACK_N, TRACK_P
from tests.support.pipeline_repo import copy_repo, sh
from tests.support.replay_files import write_jsonl
from tests.support.validated_repo import validated_copy

HOSTILE = [
    "<script>window.__pwned = 1; alert('script')</script>",
    "<img src=x onerror=\"window.__pwned = 2\">",
    "[click me](javascript:window.__pwned=3) and <a href=\"javascript:window.__pwned=3\">a</a>",
    "$\\href{javascript:window.__pwned=4}{math link}$ and $\\url{javascript:window.__pwned=4}$",
    "![pixel](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+) "
    "<a href=\"data:text/html,<script>alert(5)</script>\">d</a>",
    "<iframe src=\"javascript:window.top.__pwned=6\"></iframe>",
    "<svg onload=\"window.__pwned = 7\"><circle r=5 /></svg>",
    "<style>body { display: none !important } * { background: url(http://127.0.0.1:9/x) }"
    "</style> <link rel=stylesheet href=http://127.0.0.1:9/x.css>",
    "{{ constructor.constructor('window.__pwned = 9')() }} ${window.__pwned = 10} <%= 1 %>",
    "<meta http-equiv=refresh content=\"0;url=javascript:window.__pwned=11\">"
    "<base href=\"http://127.0.0.1:9/\"><form action=http://127.0.0.1:9/><button>go</button>"
    "</form>",
    "<object data=\"http://127.0.0.1:9/o\"></object><embed src=\"http://127.0.0.1:9/e\">"
    "<video src=http://127.0.0.1:9/v.mp4 onerror=\"window.__pwned=12\"></video>",
    "<div style=\"position:fixed;inset:0;background:red\" onclick=\"window.__pwned=13\">x</div>"
    " \\(\\htmlStyle{color:red}{x}\\) \\[\\includegraphics{http://127.0.0.1:9/i.png}\\]",
]
HOSTILE_TEXT = "\n\n".join(HOSTILE)
# Mutation XSS: markup a sanitiser passes that the browser re-parses into something live
# (namespace confusion, <noscript>, <style> in foreign content); and raw HTML in Markdown blocks.
MXSS = [
    "<svg><p><style><img src=x onerror=\"window.__pwned=20\"></style></p></svg>",
    "<math><mtext><table><mglyph><style><img src=x onerror=\"window.__pwned=21\">",
    "<noscript><p title=\"</noscript><img src=x onerror=window.__pwned=22>\"></noscript>",
    "<form><math><mtext></form><form><mglyph><style></math><img src onerror=window.__pwned=23>",
    "<template><img src=x onerror=window.__pwned=24></template><!--><img src=x onerror=x>-->",
    "```html\n<img src=x onerror=window.__pwned=25>\n```\n\n<div>\n<b onmouseover=x>b</b>\n</div>",
    "[a]: javascript:window.__pwned=26\n\n[a] <javascript:window.__pwned=27> "
    "<http://127.0.0.1:9/x> www.example.com",
]
# A RIMO-P proof of run A, with some honest math around the payloads.
HOSTILE_PROOF = ("We show $x^2 \\ge 0$ for all real $x$, so \\[\\sum_{i=1}^n a_i^2 \\ge 0.\\]\n\n"
                 + HOSTILE_TEXT)


def nest(opener: str, closer: str, depth: int, core: str = "x") -> str:
    return opener * depth + core + closer * depth


# Model text that must neither crash nor hang an item page (issue 28, section 4): what small
# models in repetition loops write, and worse. 200 nested \frac crashed Chromium's renderer.
FUZZ: dict[str, str] = {
    "frac": "A loop: $" + nest("\\frac{", "}{2}", 200) + "$ and on.",
    "sqrt": "$$" + nest("\\sqrt{", "}", 300) + "$$",
    "left": "$" + nest("\\left(", "\\right)", 500) + "$",
    "braces": "$" + nest("{", "}", 4000) + "$",
    "sup": "$$" + nest("x^{", "}", 300) + "$$",
    "arrays": "$$" + nest("\\begin{array}{c}", "\\end{array}", 200) + "$$",
    "line_1mb": ("step $a_{k+1} = \\frac{a_k}{2}$ so " * 40_000)[:1_000_000],
    "dollars": "$" * 100_000,
    "unbalanced": ("$" + "{" * 3000 + "$ and $$\\begin{aligned} x &= 1 \\\\ " * 50
                   + "\\left( " * 300 + "}" * 3000 + "\\end{array}$ \\end{cases}" * 100),
    "array_5000": "$$\\begin{array}{cc}" + "a & b \\\\ " * 5000 + "\\end{array}$$",
    "controls": ("\u202eevil\u202c \u2066x\u2069 zero\u200bwidth\u200d\ufeff NUL\x00 "
                 "bell\x07 $x\u202e^2\x00$ \u061c\u2067end"),
    "reply_10mb": ("A paragraph with $x_i^2$ and **words**.\n\n" * 250_000)[:10_000_000],
}


def build_runs(root: Path, validated: Path) -> dict[str, Any]:
    """The repo with experiments run-a and run-b, and what was put into them; from a copy of
    ``validated`` (conftest's ``validated_base``)."""
    repo = validated_copy(validated, root / "repo", predict={
        "backend": "replay", "limit": None, "replay": {"path": "replay_a.jsonl"}})
    items_n = pd.read_parquet(repo / "data/items/rimo_n.parquet")
    items_p = pd.read_parquet(repo / "data/items/rimo_p.parquet")
    gold_n = dict(zip(items_n["problem_id"], items_n["answer"], strict=True))
    graded = items_p[items_p["gradable"]]
    gold_p = {r.problem_id: list(r.sub_solutions) for r in graded.itertuples()}
    ids_n, ids_p = sorted(gold_n), sorted(gold_p)
    hostile_n, hostile_p = ids_n[:len(HOSTILE)], ids_p[0]
    # A: wrong on ids_n[20:40], hostile answers on the first 12, missing ids_n[40];
    # RIMO-P wrong last part on ids_p[0:10] (ids_p[0] holds the hostile proof).
    # B: wrong on ids_n[30:50]; RIMO-P wrong on ids_p[5:15].
    rows_a, rows_b = [], []
    for j, pid in enumerate(ids_n):
        if pid != ids_n[40]:
            pred = HOSTILE[j] if pid in hostile_n else (gold_n[pid] + "1" if 20 <= j < 40
                                                        else gold_n[pid])
            rows_a.append({"track": TRACK_N, "problem_id": pid, "prediction": pred})
        rows_b.append({"track": TRACK_N, "problem_id": pid,
                       "prediction": gold_n[pid] + "1" if 30 <= j < 50 else gold_n[pid]})
    for j, pid in enumerate(ids_p):
        sols = gold_p[pid]
        a = [*sols[:-1], HOSTILE_PROOF if pid == hostile_p else "wrong"] if j < 10 else sols
        b = [*sols[:-1], "wrong"] if 5 <= j < 15 else sols
        rows_a.append({"track": TRACK_P, "problem_id": pid, "prediction": a})
        rows_b.append({"track": TRACK_P, "problem_id": pid, "prediction": b})
    write_jsonl(repo / "replay_a.jsonl", rows_a)
    write_jsonl(repo / "replay_b.jsonl", rows_b)
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", "replays")
    for name, path in (("run-a", "replay_a.jsonl"), ("run-b", "replay_b.jsonl")):
        sh(repo, "dvc", "exp", "run", "-n", name, "-S", f"predict.replay.path={path}", "score")
    return {"repo": repo, "ids_n": ids_n, "ids_p": ids_p, "hostile_n": hostile_n,
            "hostile_p": hostile_p, "n_items": len(items_n) + len(items_p)}


def copy_runs(base: dict[str, Any], dest: Path) -> dict[str, Any]:
    """A private copy of ``build_runs``' repo (conftest's ``view_runs_base``, built once per
    pytest run), with what was put into it."""
    return {**base, "repo": copy_repo(base["repo"], dest / "repo")}


__all__ = ["FUZZ", "HOSTILE", "HOSTILE_PROOF", "HOSTILE_TEXT", "MXSS", "build_runs", "copy_runs",
           "nest", "predict_layout", "small_run", "write_jsonl"]


def small_run(root: Path, name: str, items_dir: Path, rows: list[dict[str, Any]], k: int,
              details: dict[tuple[str, str, int], dict[str, Any]] | None = None,
              limit: int | None = None, row_group_rows: int | None = None) -> Any:
    """One run made by the real replay predict and score stages over ``items_dir``, as
    ``view`` loads it, with ``details`` (model text, reasoning, usage, finish reason) written
    into the predictions table before scoring, where a model backend records them: kept in
    ``details``, one row group (as tables from before the text columns); with
    ``row_group_rows``, laid out as predict writes them now (``predict_layout``), row groups of
    that many rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rimo_eval.artifacts.paths import items_path, predictions_path, scores_path
    from rimo_eval.commands.view.load import Run
    from rimo_eval.commands.view.texts import DetailsCursor
    from rimo_eval.params.config import ScoreParams
    from rimo_eval.predict import predict
    from rimo_eval.run.revision import Revision
    from rimo_eval.score.stage import score
    from tests.support.factories import predict_section, section

    base = root / name
    base.mkdir(parents=True, exist_ok=True)
    write_jsonl(base / "replay.jsonl", rows)
    predict(predict_section(backend="replay", replay={"path": str(base / "replay.jsonl")},
                            samples=k, limit=limit), items_dir, base / "preds")
    tracks = (TRACK_N, TRACK_P)
    for track in tracks:
        path = predictions_path(track, base / "preds")
        table = pq.read_table(path)
        out = table.to_pylist()
        for row in out:
            extra = (details or {}).get((track, row["problem_id"], row["sample"]))
            if extra is not None:
                row["details"] = json.dumps({**json.loads(row["details"] or "{}"), **extra},
                                            sort_keys=True)
        pq.write_table(pa.Table.from_pylist(out, schema=table.schema), path)
        if row_group_rows is not None:
            predict_layout(path, track, row_group_rows)
    metrics = score(section(ScoreParams, "score",
                            bootstrap={"samples": 50, "seed": 0, "confidence": 0.95}),
                    items_dir, base / "preds", base / "scores", base / "metrics.json",
                    base / "plots")
    preds = {t: pd.read_parquet(predictions_path(t, base / "preds")) for t in tracks}
    return Run(Revision(name, "git", "0" * 40), json.loads(json.dumps(metrics)),
               {t: pd.read_parquet(items_path(t, items_dir)) for t in tracks}, preds,
               {t: pd.read_parquet(scores_path(t, base / "scores")) for t in tracks},
               None, {t: DetailsCursor(predictions_path(t, base / "preds"), t)
                      for t in tracks})


def predict_layout(path: Path, track: str, rows_per_group: int | None = None) -> None:
    """The predictions table at ``path`` rewritten as predict writes it: reasoning and raw text
    in columns of their own (``split_texts``), cut in predict's row groups (``row_groups``:
    ``rows_per_group`` rows, fewer where the texts are long)."""
    import pyarrow.parquet as pq

    from rimo_eval.artifacts.predictions import (
        RAW_TEXT,
        REASONING,
        parse_details,
        row_groups,
        split_texts,
    )
    from rimo_eval.io.hashing import canonical_json

    source = pq.ParquetFile(path)

    def rows() -> Iterator[dict[str, Any]]:
        for batch in source.iter_batches(batch_size=256):
            for row in batch.to_pylist():
                light, reasoning, raw = split_texts(track, parse_details(row["details"]))
                yield row | {"details": canonical_json(light), REASONING: reasoning,
                             RAW_TEXT: raw}

    tmp = path.with_suffix(".relayout.tmp")
    with pq.ParquetWriter(tmp, source.schema_arrow) as writer:
        for table in row_groups(rows(), source.schema_arrow, rows_per_group):
            writer.write_table(table)
    source.close()
    tmp.replace(path)
