"""lm-eval as a peer of ``predict_throughput.py``: the same prompts through its
``local-chat-completions`` model, ``num_concurrent`` connections, one process per row.

lm-eval is installed by ``lmeval_venv`` into ``benchmarks/.venvs/lm-eval`` (torch 2.13.0, the
CPU wheel this machine keeps on disk), never a project dependency. The prompts become a local
task (a JSONL file read through ``datasets``' ``json`` builder, offline), one document per
prompt; each document is sent once, as a chat request built by ``--apply_chat_template``.

What lm-eval 0.4.11 does with these arguments (``lm_eval/models/api_models.py``):

* ``num_concurrent`` > 1: every request is an asyncio task up front, gated by a semaphore and an
  aiohttp connector of that size, so it keeps ``num_concurrent`` requests in flight; at 1 it
  posts one after another with ``requests.post`` (no session, and ``timeout`` is not applied).
* ``max_retries=1`` is tenacity's ``stop_after_attempt(1)``: one attempt, no retry; a failed
  request fails the process. ``tokenizer_backend=None`` turns tokenization off (nothing is
  loaded from the hub, no context-length check); no response cache without ``--use_cache``.
* Requests are sent longest prompt first (its ``Collator``), not in the given order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from timed import run_timed

LMEVAL_VERSION = "0.4.11"
TORCH_VERSION = "2.13.0"  # on this disk as a CPU wheel; a bare "torch" would pull CUDA
VENV = Path(__file__).resolve().parent / ".venvs" / "lm-eval"
TASK_NAME = "rimo_prompts"


def _installed(python: Path) -> bool:
    """Both pins are in the venv (read from package metadata: importing torch takes seconds)."""
    probe = ("from importlib.metadata import version as v; "
             "print(v('lm_eval'), v('torch').split('+')[0])")
    try:
        done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.split() == [LMEVAL_VERSION, TORCH_VERSION]


def lmeval_venv(install: bool = True) -> Path | None:
    """The venv's python, installing lm-eval on first use (if ``install``); None if it is not
    there or cannot be installed."""
    python = VENV / "bin" / "python"
    if _installed(python):
        return python
    if not install:
        return None
    print(f"installing lm_eval[api]=={LMEVAL_VERSION} into {VENV} (about 1.7 GB) ...",
          file=sys.stderr)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        # torch pinned in the same command, so that the resolver cannot pick another one.
        subprocess.run([str(python), "-m", "pip", "install", "-q",
                        f"lm_eval[api]=={LMEVAL_VERSION}", f"torch=={TORCH_VERSION}"],
                       check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"lm-eval could not be installed: {exc}", file=sys.stderr)
        return None
    if not _installed(python):
        print(f"lm-eval could not be installed: {VENV} lacks the pinned versions",
              file=sys.stderr)
        return None
    return python


def _task(data: Path) -> dict[str, object]:
    """The task config; written as JSON, which its YAML loader reads (no quoting to get wrong)."""
    return {
        "task": TASK_NAME,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test",
        "output_type": "generate_until",
        # Column names, not Jinja templates: the texts reach the messages verbatim. A non-empty
        # ``description`` becomes the system message.
        "doc_to_text": "prompt",
        "description": "system",
        "doc_to_target": "",
        "generation_kwargs": {"until": [], "max_gen_toks": 64},
        "metric_list": [{"metric": "exact_match"}],
    }


def _document(messages: list[dict[str, str]]) -> dict[str, str]:
    """The document of one prompt: a user message, after at most one system message."""
    roles = [m["role"] for m in messages]
    if roles not in (["user"], ["system", "user"]):
        raise ValueError(f"lm-eval row takes [system,] user messages, got roles {roles}")
    return {"system": messages[0]["content"] if len(messages) == 2 else "",
            "prompt": messages[-1]["content"]}


def _answered(out: Path) -> int:
    """Documents in the logged samples that got a reply (lm-eval logs a failed one as "")."""
    count = 0
    for path in out.rglob(f"samples_{TASK_NAME}_*.jsonl"):
        with open(path, encoding="utf-8") as fh:
            count += sum(1 for line in fh if json.loads(line)["resps"] != [[""]])
    return count


def run_lmeval(python: Path, base_url: str, prompts: list[list[dict[str, str]]],
               concurrency: int, work: Path) -> tuple[float, float, int]:
    """(process wall clock s, peak RSS MiB, requests answered) of one lm-eval run: one request
    per prompt, since there is one document per prompt and no retry."""
    folder = Path(tempfile.mkdtemp(dir=work, prefix="lmeval-"))
    data = folder / "prompts.jsonl"
    with open(data, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(_document(m)) + "\n" for m in prompts)
    (folder / "tasks").mkdir()
    (folder / "tasks" / f"{TASK_NAME}.yaml").write_text(json.dumps(_task(data), indent=1),
                                                        encoding="utf-8")
    model_args = ",".join([
        "model=bench", f"base_url={base_url}/chat/completions", f"num_concurrent={concurrency}",
        "max_retries=1", "tokenized_requests=False", "tokenizer_backend=None", "timeout=60"])
    # Offline: the hub is unreachable here; HF_HOME in the folder keeps the datasets cache cold.
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(folder / "hf"), "OPENAI_API_KEY": "EMPTY",
           "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)  # the project's packages stay out of lm-eval's process
    command = [str(python), "-m", "lm_eval", "--model", "local-chat-completions",
               "--model_args", model_args, "--tasks", TASK_NAME,
               "--include_path", str(folder / "tasks"), "--apply_chat_template",
               "--batch_size", "1", "--output_path", str(folder / "out"), "--log_samples"]
    done = run_timed(command, folder, env)
    if done.returncode != 0:
        raise RuntimeError(f"lm-eval failed ({done.returncode}):\n{done.output[-3000:]}")
    answered = _answered(folder / "out")
    if answered != len(prompts):
        raise RuntimeError(f"lm-eval got replies to {answered} of {len(prompts)} prompts:\n"
                           f"{done.output[-3000:]}")
    return done.wall_s, done.rss_mib, answered
