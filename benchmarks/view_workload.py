"""The synthetic runs ``view_build.py`` measures the view on: real items, replies made up.

Short replies (``reply``, ``synthetic_run``) and the reasoning workload (``Prose``,
``reasoning_run``, ``expanded_run``): runs made by the real replay predict and score stages,
the predictions tables laid out as predict writes them (``as_predict_writes``), loaded as
``rimo-eval view`` loads a run (``load_small``).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rimo_eval.rimo.tracks import TRACK_N, TRACK_P


def reply(rng: random.Random, chars: int, answer: str) -> str:
    parts, size = [], 0
    while size < chars:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        s = (f"Let $x_{{{a}}} = \\frac{{{a}}}{{{b}}}$ and consider *step {a}*: "
             f"\\[\\sum_{{i=1}}^{{{b}}} i^2 = {b * (b + 1) * (2 * b + 1) // 6}.\\] ")
        parts.append(s)
        size += len(s)
    return "".join(parts) + f"\n\nSo the answer is $\\boxed{{{answer}}}$."


SYLLABLES = ["ta", "ne", "ri", "so", "lu", "ka", "mi", "po", "de", "va", "sha", "gro", "ex",
             "in", "or", "al", "um", "ber", "tri", "con"]


POOL = 400_000  # sentences Prose draws from (see Prose.text)


class Prose:
    """Prose-like reasoning that compresses like real text, not one repeated phrase: sentences
    drawn from a seeded, Zipf-weighted vocabulary of 6,000 words (common words short), with
    inline and display math of random symbols and numbers."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        words: list[str] = ["the", "of", "and", "so", "is", "we", "that", "a", "to", "it"]
        while len(words) < 6000:
            w = "".join(rng.choice(SYLLABLES) for _ in range(1 + min(4, len(words) // 600)))
            words.append(w)
        self.words = words
        self.cum = list(itertools.accumulate(1 / (r + 1) for r in range(len(words))))
        self.rng = rng

    def sentence(self) -> str:
        rng = self.rng
        body = rng.choices(self.words, cum_weights=self.cum, k=rng.randint(6, 22))
        a, b, v = rng.randint(1, 99), rng.randint(2, 999), rng.choice("xyznkpq")
        math = rng.choice([f"${v}_{{{a}}} = {b}$", f"$\\frac{{{v}}}{{{b}}}$",
                           f"$({v} + {a})^2 \\equiv {b} \\pmod{{{a + 2}}}$", "",
                           f"\\[\\sum_{{i=1}}^{{{a}}} {v}_i = {b}.\\]", ""])
        if math:
            body.insert(rng.randint(0, len(body)), math)
        return " ".join(body).capitalize() + rng.choice([".", ".", ".", ":", "?"])

    def text(self, chars: int, answer: str | None = None) -> str:
        # Paragraphs of sentences drawn from a pool (made once: drawing words for each of
        # 3.2 GB of text takes minutes). An item's texts are compressed together in one
        # Zstandard frame whose window spans the item (2 MB at k = 64), so a sentence must
        # rarely repeat within an item: 400,000 sentences, of which an item at k = 64 draws
        # about 19,000. (With 50,000 an item at k = 64 compressed 8% smaller than fresh text
        # would: 0.307 of its size against 0.333.)
        if not hasattr(self, "pool"):
            self.pool = [self.sentence() for _ in range(POOL)]
        parts: list[str] = []
        size = 0
        while size < chars:
            p = " ".join(self.rng.choices(self.pool, k=self.rng.randint(2, 6))) + "\n\n"
            parts.append(p)
            size += len(p)
        end = f"So the answer is $\\boxed{{{answer}}}$." if answer is not None else ""
        return "".join(parts)[:max(0, chars - len(end))] + end


def reasoning_run(work: Path, name: str, k: int, reasoning: int, answer: int, seed: int
                  ) -> tuple[Any, int, int]:
    """A run of k samples per item, each reply ``answer`` characters with ``reasoning``
    characters of reasoning (RIMO-P: each part is a reply; a right part copies the reference
    sub-solution), made by the real replay predict
    and score stages; and the UTF-8 bytes of its reply texts (answers, reasoning, RIMO-P parts
    written by the model) and how many replies (RIMO-N samples, RIMO-P parts)."""

    from tests.support.view_runs import small_run

    items = work / "data/items"
    prose = Prose(seed)
    rows, details = synthetic_rows(
        items, k, random.Random(seed),
        lambda ans: {"text": prose.text(answer, ans), "reasoning": prose.text(reasoning),
                     "finish_reason": "stop", "extraction": "boxed",
                     "usage": {"completion_tokens": (reasoning + answer) // 4,
                               "prompt_tokens": 200}},
        lambda m: prose.text(answer),
        lambda m: {"parts": [{"reasoning": prose.text(reasoning), "finish_reason": "stop"}
                             for _ in range(m)]})
    size = sum(len(v.encode("utf-8")) for d in details.values()
               for v in (d.get("text"), d.get("reasoning"),
                         *(x["reasoning"] for x in d.get("parts", [])))
               if isinstance(v, str))
    size += sum(len(x.encode("utf-8")) for r in rows if r["track"] == TRACK_P
                for x in r["prediction"])
    replies = sum(len(d.get("parts", [None])) for d in details.values())
    if not (work / name / "metrics.json").is_file():  # else prepared before (--work)
        small_run(work, name, items, rows, k, details)
    del details
    for track in (TRACK_N, TRACK_P):
        as_predict_writes(work / name / "preds", track)
    return load_small(str(work / name), str(items), name), size, replies


def expanded_run(work: Path, base: str, name: str, factor: int, seed: int
                 ) -> tuple[Any, int, int]:
    """Run ``base`` with each sample repeated ``factor`` times (sample j + c * k), every repeat's
    texts written afresh (Prose, same lengths; a RIMO-P part that copies the reference keeps
    it, so the scores keep their shape), then scored by the real score stage: a k = 64 run
    from a k = 16 one, written a row group at a time (preparing it fresh in one go takes over
    12 GB here). Returns the run, the UTF-8 bytes of its reply texts and its replies."""
    import pandas as pd
    import pyarrow.parquet as pq

    from rimo_eval.artifacts.paths import predictions_path
    from rimo_eval.artifacts.predictions import RAW_TEXT, REASONING, row_groups
    from rimo_eval.io.hashing import canonical_json
    from rimo_eval.params.config import ScoreParams
    from rimo_eval.score.stage import score
    from tests.support.factories import section

    src, dst, items = work / base, work / name, work / "data/items"
    counted = dst / "reply_text.json"  # what was written (--work: prepared before)
    if not counted.is_file():
        references = {str(x) for xs in pd.read_parquet(items / "rimo_p.parquet")[
            "sub_solutions"] for x in xs}
        prose = Prose(seed)
        (dst / "preds").mkdir(parents=True, exist_ok=True)
        size = replies = 0
        k = int(base[1:].rstrip("b"))  # "k16", "k16b"

        def fresh(v: Any, c: int) -> Any:
            if isinstance(v, str):
                return v if c == 0 or v in references else prose.text(len(v))
            if isinstance(v, list):
                return [fresh(x, c) for x in v]
            return v

        def utf8(v: Any) -> int:
            if isinstance(v, str):
                return len(v.encode("utf-8"))
            return sum(utf8(x) for x in v) if isinstance(v, list) else 0

        def repeated(track: str, source: Any) -> Iterator[dict[str, Any]]:
            """Each item's rows, then each repeat of them (samples j + c * k, in order)."""
            nonlocal size, replies
            for group in item_rows(source):
                for c in range(factor):
                    for row in group:
                        new = dict(row, sample=row["sample"] + c * k)
                        d = json.loads(row["details"] or "{}")
                        if isinstance(d.get("text"), str):
                            d["text"] = fresh(d["text"], c)
                        new["details"] = canonical_json(d)
                        new[REASONING] = fresh(row[REASONING], c)
                        new[RAW_TEXT] = fresh(row[RAW_TEXT], c)
                        size += utf8(d.get("text")) + utf8(new[REASONING]) + utf8(new[RAW_TEXT])
                        if track == TRACK_P:
                            new["prediction"] = fresh(row["prediction"], c)
                            size += utf8(new["prediction"])
                        replies += len(d["parts"]) if isinstance(d.get("parts"), list) else 1
                        yield new

        for track in (TRACK_N, TRACK_P):
            source = pq.ParquetFile(predictions_path(track, src / "preds"))
            with pq.ParquetWriter(predictions_path(track, dst / "preds"),
                                  source.schema_arrow) as writer:
                for table in row_groups(repeated(track, source), source.schema_arrow):
                    writer.write_table(table)
            source.close()
        score(section(ScoreParams, "score",
                      bootstrap={"samples": 50, "seed": 0, "confidence": 0.95}), items,
              dst / "preds", dst / "scores", dst / "metrics.json", dst / "plots")
        counted.write_text(json.dumps({"size": size, "replies": replies}))
    done = json.loads(counted.read_text())
    return load_small(str(dst), str(items), name), done["size"], done["replies"]


def item_rows(source: Any) -> Iterator[list[dict[str, Any]]]:
    """A predictions table's rows (a ParquetFile), an item at a time."""
    group: list[dict[str, Any]] = []
    for batch in source.iter_batches(batch_size=256):
        for row in batch.to_pylist():
            if group and row["problem_id"] != group[0]["problem_id"]:
                yield group
                group = []
            group.append(row)
    if group:
        yield group


def as_predict_writes(preds: Path, track: str) -> None:
    """The predictions table laid out as the predict stage writes it (``predict_layout``);
    small_run leaves the texts in ``details``, one row group: a reader would decode 1 GB at
    once. Done once per table (``--work``)."""
    from rimo_eval.artifacts.paths import predictions_path
    from tests.support.view_runs import predict_layout

    path = predictions_path(track, preds)
    done = path.with_suffix(".relaid")
    if not done.exists():
        predict_layout(path, track)
        done.write_text("")


def synthetic_rows(items: Path, k: int, rng: random.Random,
                   n_details: Callable[[str], dict[str, Any]], p_part: Callable[[int], str],
                   p_details: Callable[[int], dict[str, Any]] | None = None
                   ) -> tuple[list[dict[str, Any]], dict[tuple[str, str, int], Any]]:
    """The replay rows of a k-sample run over the items in ``items`` and their details: a
    RIMO-N sample right 40% of the time, its details ``n_details(answer)``; a gradable RIMO-P
    item's part right (the reference) half the time, else ``p_part(parts)``, its details
    ``p_details(parts)`` where given. ``rng`` draws the outcomes (in this order)."""
    import pandas as pd

    n = pd.read_parquet(items / "rimo_n.parquet")
    p = pd.read_parquet(items / "rimo_p.parquet")
    rows: list[dict[str, Any]] = []
    details: dict[tuple[str, str, int], Any] = {}
    for pid, gold in zip(n["problem_id"], n["answer"], strict=True):
        for j in range(k):
            ans = gold if rng.random() < 0.4 else str(rng.randint(0, 999))
            rows.append({"track": TRACK_N, "problem_id": pid, "sample": j, "prediction": ans})
            details[(TRACK_N, pid, j)] = n_details(ans)
    for r in p[p["gradable"]].itertuples():
        m = len(r.sub_solutions)
        for j in range(k):
            pred = [s if rng.random() < 0.5 else p_part(m) for s in r.sub_solutions]
            rows.append({"track": TRACK_P, "problem_id": r.problem_id, "sample": j,
                         "prediction": pred})
            if p_details is not None:
                details[(TRACK_P, r.problem_id, j)] = p_details(m)
    return rows, details


def synthetic_run(work: Path, k: int, chars: int) -> Any:
    from tests.support.view_runs import small_run

    items = work / "data/items"
    rng = random.Random(k)
    rows, details = synthetic_rows(
        items, k, rng,
        lambda ans: {"text": reply(rng, chars, ans), "finish_reason": "stop",
                     "extraction": "boxed",
                     "usage": {"completion_tokens": chars // 4, "prompt_tokens": 200}},
        lambda m: reply(rng, chars // m, "x"))
    return small_run(work, f"k{k}", items, rows, k, details)


def load_small(base: str, items: str, name: str) -> Any:
    """A run small_run made, loaded again from its files (as ``small_run`` returns it)."""
    import pandas as pd
    import pyarrow.parquet as pq

    from rimo_eval.artifacts.paths import items_path, predictions_path, scores_path
    from rimo_eval.artifacts.predictions import TEXT_COLUMNS
    from rimo_eval.commands.view.load import Run
    from rimo_eval.commands.view.texts import DetailsCursor
    from rimo_eval.run.revision import Revision

    def light(path: Path) -> Any:  # as load.py reads it: no texts, no details
        names = pq.ParquetFile(path).schema_arrow.names
        return pd.read_parquet(path, columns=[c for c in names
                                              if c not in (*TEXT_COLUMNS, "details")])

    b, tracks = Path(base), (TRACK_N, TRACK_P)
    metrics = json.loads((b / "metrics.json").read_text(encoding="utf-8"))
    return Run(Revision(name, "git", "0" * 40), metrics,
               {t: pd.read_parquet(items_path(t, Path(items))) for t in tracks},
               {t: light(predictions_path(t, b / "preds")) for t in tracks},
               {t: pd.read_parquet(scores_path(t, b / "scores")) for t in tracks},
               None, {t: DetailsCursor(predictions_path(t, b / "preds"), t)
                      for t in tracks})
