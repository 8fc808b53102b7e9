"""lm-eval as a peer of ``predict_throughput.py``: the same prompts through its
``local-chat-completions`` model, ``num_concurrent`` connections, one process per row.

lm-eval is installed by ``lmeval_venv`` into ``benchmarks/.venvs/lm-eval`` (torch 2.13.0, the
CPU wheel this machine keeps on disk), never a project dependency. The prompts become a local
task (a JSONL file read through ``datasets``' ``json`` builder, offline), one document per
prompt; each document is sent once, as a chat request built by ``--apply_chat_template``.
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

TASK = """task: rimo_prompts
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: ""
generation_kwargs:
  until: []
  max_gen_toks: 64
metric_list:
  - metric: exact_match
"""


def lmeval_venv() -> Path | None:
    """The venv's python, installing lm-eval on first use; None if it cannot be installed."""
    python = VENV / "bin" / "python"
    if not (VENV / "bin" / "lm_eval").exists():
        print(f"installing lm_eval[api]=={LMEVAL_VERSION} into {VENV} ...", file=sys.stderr)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q",
                            f"lm_eval[api]=={LMEVAL_VERSION}", f"torch=={TORCH_VERSION}"],
                           check=True)
        except subprocess.CalledProcessError as exc:
            print(f"lm-eval could not be installed: {exc}", file=sys.stderr)
            return None
    return python


def run_lmeval(python: Path, base_url: str, prompts: list[list[dict[str, str]]],
               concurrency: int, work: Path) -> tuple[float, float, int]:
    """(process wall clock s, peak RSS MiB, documents evaluated) of one lm-eval run."""
    folder = Path(tempfile.mkdtemp(dir=work, prefix="lmeval-"))
    data = folder / "prompts.jsonl"
    with open(data, "w", encoding="utf-8") as fh:
        for messages in prompts:
            # rimo-eval's prompts are one user message (no system prompt by default).
            if [m["role"] for m in messages] != ["user"]:
                raise ValueError(f"lm-eval row expects one user message, got {messages}")
            fh.write(json.dumps({"prompt": messages[0]["content"]}) + "\n")
    (folder / "tasks").mkdir()
    (folder / "tasks" / "rimo_prompts.yaml").write_text(TASK.format(data=data), "utf-8")
    model_args = ",".join([
        "model=bench", f"base_url={base_url}/chat/completions", f"num_concurrent={concurrency}",
        "max_retries=1", "tokenized_requests=False", "tokenizer_backend=None", "timeout=60"])
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(folder / "hf"), "OPENAI_API_KEY": "EMPTY",
           "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    command = [str(python), "-m", "lm_eval", "--model", "local-chat-completions",
               "--model_args", model_args, "--tasks", "rimo_prompts",
               "--include_path", str(folder / "tasks"), "--apply_chat_template",
               "--batch_size", "1", "--output_path", str(folder / "out"), "--log_samples"]
    done = run_timed(command, folder, env)
    if done.returncode != 0:
        raise RuntimeError(f"lm-eval failed:\n{done.output[-3000:]}")
    samples = list((folder / "out").rglob("samples_rimo_prompts_*.jsonl"))
    documents = sum(1 for p in samples for _ in p.open(encoding="utf-8"))
    if documents != len(prompts):
        raise RuntimeError(f"lm-eval evaluated {documents} of {len(prompts)} prompts:\n"
                           f"{done.output[-3000:]}")
    return done.wall_s, done.rss_mib, documents
