"""Every Eval Ever 0.3.0: a run's aggregate JSON (``eval.schema.json``) and its instance JSONL
(``instance_level_eval.schema.json``, rows by ``instances``), in the datastore's layout
``data/rimo/<developer>/<model>/<uuid>.json`` and ``<uuid>_samples.jsonl``, so that a
submission is a copy of ``data/`` into the datastore repository.

Deterministic: the uuid is made from the run's metrics (which name its provenance, hence its
predictions), the timestamps are the run's commit date, never the clock.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from rimo_eval.commands.export.instances import SCHEMA_VERSION, Rows, line, predictions
from rimo_eval.commands.export.source import ExportRun
from rimo_eval.io.hashing import canonical_json
from rimo_eval.params.config import PREDICT_OUTPUT_KEYS
from rimo_eval.rimo.tracks import TRACK_N, TRACK_P, TRACKS

COLLECTION = "rimo"
WILSON = "Wilson score interval (rimo_eval.stats.wilson)"
MEANS = ("Wilson score interval of the sum of per-item fractions (rimo_eval.stats.means)")
KISH = MEANS[:-1] + "; items weighted by their parts, Kish's effective n)"
DESCRIPTIONS = {
    "accuracy": "fraction of items whose answer (RIMO's extraction: the last \\boxed{}) "
                "equals the gold exactly",
    "strict": "fraction of gradable items with every part right",
    "prefix_score": "mean over gradable items of the fraction of parts right before the "
                    "first wrong one",
    "sub_problem_accuracy": "parts right over parts asked, over gradable items",
    "pass_at_k": "fraction of items with at least one right sample of k",
    "maj_at_k": "fraction of items whose most frequent answer of k is right",
}
# (metric path in the track's block, interval method) of each track's primary metrics, then
# of its k-sample metrics (k > 1). pass@k and maj@k are per-item 0/1: Wilson (stats' rule).
PRIMARY = {TRACK_N: [("accuracy", WILSON)],
           TRACK_P: [("prefix_score", MEANS), ("strict", WILSON),
                     ("sub_problem_accuracy", KISH)]}
K_SAMPLE = {TRACK_N: [("mean_at_k.accuracy", MEANS), ("pass_at_k", WILSON),
                      ("maj_at_k", WILSON)],
            TRACK_P: [("mean_at_k.strict", MEANS), ("mean_at_k.sub_problem_accuracy", KISH),
                      ("mean_at_k.prefix_score", MEANS), ("pass_at_k", WILSON)]}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
GEN_ARGS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
            "max_tokens": "max_tokens", "max_completion_tokens": "max_tokens",
            "max_output_tokens": "max_tokens"}


def _get(block: Any, path: str) -> Any:
    for key in path.split("."):
        block = block.get(key) if isinstance(block, dict) else None
    return block


def _lookup(block: Any, parts: list[str]) -> tuple[bool, Any]:
    for key in parts:
        if not isinstance(block, dict) or key not in block:
            return False, None
        block = block[key]
    return True, block


def model_id(run: ExportRun, given: str | None) -> str:
    """The Hugging Face style id: ``--model-id``, else the run's model name where it is
    ``org/name``, else ``unknown/<name>``."""
    if given:
        return given
    name = run.model.strip()
    if re.fullmatch(r"[A-Za-z0-9._-]+/[A-Za-z0-9._:-]+", name):
        return name
    return f"unknown/{_component(name)}"


def _component(text: str) -> str:
    out = _UNSAFE.sub("_", text.replace(":", "_")).strip("._") or "_"
    return "_data" if out == "data" else out


def folder(mid: str) -> Path:
    developer, _, name = mid.partition("/")
    return Path("data", COLLECTION, _component(developer), _component(name or developer))


def run_uuid(run: ExportRun) -> str:
    """A UUID4-shaped id made from the run's metrics and label, the same on every export."""
    digest = hashlib.sha256(canonical_json({"metrics": run.metrics, "rev": run.rev})
                            .encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def epoch(run: ExportRun) -> str:
    """The run's date as Unix seconds (the schema's retrieved_timestamp format)."""
    if not run.date:
        return "unknown"
    return str(int(datetime.fromisoformat(run.date).timestamp()))


def confidence(run: ExportRun) -> float:
    prov = _get(run.metrics, "provenance.params.score.bootstrap.confidence")
    value = prov if prov is not None else _get(run.params, "score.bootstrap.confidence")
    return float(value) if isinstance(value, int | float) else 0.95


def generation_config(params: dict[str, Any]) -> dict[str, Any]:
    """The predict params that change the results (config.PREDICT_OUTPUT_KEYS, from the
    ``Result`` and ``Content`` marks of params/effects.py) of the run's backend, each as JSON in
    additional_details; the ones EEE names also in generation_args."""
    found = params.get("predict")
    predict: dict[str, Any] = found if isinstance(found, dict) else {}
    backend = str(predict.get("backend", ""))
    details, args = {}, {}
    for key in PREDICT_OUTPUT_KEYS:
        parts = key.split(".")[1:]
        if len(parts) > 1 and parts[0] != backend:
            continue  # another backend's section
        found, value = _lookup(predict, parts)
        if not found:
            continue  # as the file has it: a key it does not set is left out
        details[key] = json.dumps(value, sort_keys=True, ensure_ascii=False)
        arg = GEN_ARGS.get(parts[-1]) if len(parts) > 1 else None
        if arg and isinstance(value, int | float) and not isinstance(value, bool) and \
                (arg != "max_tokens" or (isinstance(value, int) and value >= 1)):
            args[arg] = value
    return {"generation_args": args, "additional_details": details}


def _source(params: dict[str, Any], track: str, n: int) -> dict[str, Any]:
    found = params.get("fetch")
    fetch: dict[str, Any] = found if isinstance(found, dict) else {}
    repo, rev = str(fetch.get("repo", "ziye2chen/RIMO")), str(fetch.get("revision", "main"))
    return {"dataset_name": track, "source_type": "url",
            "url": [f"https://github.com/{repo}/tree/{rev}"],
            "additional_details": {"repo": repo, "revision": rev, "items": str(n)}}


def _result(run: ExportRun, track: str, path: str, method: str, k: int, level: float,
            gen: dict[str, Any]) -> dict[str, Any] | None:
    block = run.metrics.get(track) or {}
    value = _get(block, path)
    if not isinstance(value, int | float):
        return None  # no items: no score
    name = path.split(".")[-1] if path.startswith("mean_at_k") else path
    kind = "mean_at_k" if path.startswith("mean_at_k") else path
    n = int(block.get("n") or 0)
    total = int(_get(run.metrics, f"sample.total.{track}") or n)
    low, high = (_get(block, f"ci.{path}.{end}") for end in ("low", "high"))
    uncertainty: dict[str, Any] = {"num_samples": n}
    if isinstance(low, int | float) and isinstance(high, int | float):
        uncertainty["confidence_interval"] = {"lower": low, "upper": high,
                                              "confidence_level": level, "method": method}
    what = DESCRIPTIONS.get(name, name)
    if kind == "mean_at_k":
        what = f"{what}, averaged over k samples"
    return {
        "evaluation_result_id": f"{track}/{path}", "evaluation_name": track,
        "source_data": _source(run.params, track, total),
        "evaluation_timestamp": run.date or "unknown",
        "metric_config": {"evaluation_description": what, "metric_id": f"{track}/{path}",
                          "metric_name": path, "metric_kind": kind, "metric_unit": "proportion",
                          "metric_parameters": {"k": k} if "_at_" in kind else {},
                          "lower_is_better": False, "score_type": "continuous",
                          "min_score": 0, "max_score": 1},
        "score_details": {"score": value, "details": {"n": str(n)}, "uncertainty": uncertainty},
        "generation_config": gen,
    }


def results(run: ExportRun) -> list[dict[str, Any]]:
    """Every primary metric of both tracks with its interval, then (k > 1) the k-sample ones
    with their k (pass@j for each j of score.pass_at, without an interval)."""
    level, gen, out = confidence(run), generation_config(run.params), []
    for track in TRACKS:
        block = run.metrics.get(track) or {}
        k = int(block.get("k") or 1)
        specs = PRIMARY[track] + (K_SAMPLE[track] if k > 1 else [])
        specs += [(f"pass_at.{j}", "") for j in sorted(block.get("pass_at") or {}, key=int)]
        for path, method in specs:
            found = _result(run, track, path, method, k, level, gen)
            if found is not None:
                if path.startswith("pass_at."):
                    found["metric_config"]["metric_parameters"] = {"k": int(path[8:]),
                                                                   "n": k}
                out.append(found)
    return out


def library_version() -> str:
    """rimo-eval's version as installed (the package's own where it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rimo-eval")
    except PackageNotFoundError:
        from rimo_eval import __version__

        return __version__


def aggregate(run: ExportRun, mid: str, organization: str, eid: str, instances: str,
              checksum: str, rows: int) -> dict[str, Any]:
    backend = str(_get(run.params, "predict.backend") or run.model)
    return {
        "schema_version": SCHEMA_VERSION, "evaluation_id": eid,
        "evaluation_timestamp": run.date or "unknown", "retrieved_timestamp": epoch(run),
        "source_metadata": {"source_name": "rimo-eval", "source_type": "evaluation_run",
                            "source_organization_name": organization,
                            "evaluator_relationship": "third_party",
                            "additional_details": {"run": run.label, "commit": run.rev or ""}},
        "eval_library": {"name": "rimo-eval", "version": library_version(),
                         "additional_details": {"grading": "RIMO's recipe (exact match on "
                                                "the last \\boxed{}; RIMO-P parts in order)"}},
        "model_info": {"name": run.model, "id": mid,
                       "additional_details": {"deployment_type": "unknown",
                                              "model_availability": "unknown",
                                              "backend": backend}},
        "evaluation_results": results(run),
        "detailed_evaluation_results": {"format": "jsonl", "file_path": instances,
                                        "hash_algorithm": "sha256", "checksum": checksum,
                                        "total_rows": rows},
    }


def write_eee(run: ExportRun, out: Path, mid: str, organization: str) -> tuple[Path, int]:
    """The two files under ``out`` (a fresh folder); the aggregate's path and the rows."""
    name, where = run_uuid(run), folder(mid)
    eid = f"{COLLECTION}/{mid}/{epoch(run)}"
    samples = where / f"{name}_samples.jsonl"
    (out / where).mkdir(parents=True)
    rows = Rows(eid, mid, run.items, run.scores)
    digest, count = hashlib.sha256(), 0
    with open(out / samples, "wb") as fh:
        for track in TRACKS:
            for pred in predictions(run.predictions_table(track)):
                data = line(rows.row(track, pred))
                fh.write(data)
                digest.update(data)
                count += 1
    agg = aggregate(run, mid, organization, eid, samples.as_posix(), digest.hexdigest(), count)
    (out / where / f"{name}.json").write_text(
        json.dumps(agg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return where / f"{name}.json", count


__all__ = ["COLLECTION", "K_SAMPLE", "PRIMARY", "aggregate", "folder", "generation_config",
           "library_version", "model_id", "results", "run_uuid", "write_eee"]
