"""Logs written by the real peer tools, offline: an inspect_ai ``.eval`` log and an lm-eval
``--log_samples`` file, each holding replies we chose, for the replay import tests.

Each tool lives in its own venv, never a project dependency: ``RIMO_INSPECT_VENV`` /
``RIMO_LMEVAL_VENV`` name an existing one (a folder with ``bin/python``); otherwise it is created
under ``benchmarks/.venvs/`` (git-ignored) and the pinned version installed on first use (about
1.5 min each, once per clone). Both run with the project's code off their path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.chat_server import ChatServer

ROOT = Path(__file__).resolve().parents[2]
INSPECT_VERSION = "0.3.285"
LMEVAL_VERSION = "0.4.13"
_TOOLS = {"inspect": ("RIMO_INSPECT_VENV", "inspect_ai", f"inspect-ai=={INSPECT_VERSION}",
                      INSPECT_VERSION),
          "lmeval": ("RIMO_LMEVAL_VENV", "lm_eval", f"lm-eval[api]=={LMEVAL_VERSION}",
                     LMEVAL_VERSION)}
LMEVAL_TASK = "rimo_n_import"


@dataclass(frozen=True)
class Reply:
    """One sample's reply as the peer tool will log it."""

    problem_id: str
    problem: str
    gold: str
    text: str
    reasoning: str | None = None


def tool_python(tool: str) -> Path:
    """The python of the tool's venv, at the pinned version (installed here on first use)."""
    env_var, module, requirement, version = _TOOLS[tool]
    venv = Path(os.environ.get(env_var) or ROOT / "benchmarks" / ".venvs" / f"{tool}-{version}")
    python = venv / "bin" / "python"
    probe = f"from importlib.metadata import version; print(version({module!r}))"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", requirement], check=True)
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                           check=True).stdout.strip()
    if found != version:
        raise RuntimeError(f"{venv}: {module} {found}, the tests pin {version}")
    return python


def _clean_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "HOME": str(home), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(home / "hf"), "OPENAI_API_KEY": "EMPTY"}
    env.pop("PYTHONPATH", None)  # the project's packages stay out of the tool's process
    return env


# inspect estimates tokens with tiktoken's o200k_base, which it downloads: offline, a
# length-based estimator stands in (../shared/notes/servers.md). mockllm consumes the custom
# outputs in call order, hence one connection and one sample at a time.
_INSPECT_SCRIPT = '''
import json, sys
import tiktoken
class _Estimate:
    def encode(self, text, *a, **k): return [0] * max(1, len(text) // 4)
    def decode(self, tokens): return ""
tiktoken.get_encoding = lambda name: _Estimate()
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import (ChatCompletionChoice, ChatMessageAssistant, ContentReasoning,
                              ContentText, ModelOutput, ModelUsage, get_model)
from inspect_ai.scorer import match
from inspect_ai.solver import generate
spec = json.load(open(sys.argv[1], encoding="utf-8"))
def output(s):
    content = [ContentText(text=s["text"])]
    if s["reasoning"]:
        content.insert(0, ContentReasoning(reasoning=s["reasoning"]))
    return ModelOutput(model="model", choices=[ChatCompletionChoice(
        message=ChatMessageAssistant(content=content, model="model"), stop_reason="stop")],
        usage=ModelUsage(input_tokens=100, output_tokens=len(s["text"]),
                         total_tokens=100 + len(s["text"])))
replies = spec["replies"]
model = get_model("mockllm/model", custom_outputs=[output(s) for s in replies])
dataset = [Sample(id=s["problem_id"], input=s["problem"], target=s["gold"]) for s in replies]
logs = inspect_eval(Task(dataset=dataset, solver=generate(), scorer=match(), name=spec["task"]),
                    model=model, log_dir=spec["log_dir"], log_format="eval", max_connections=1,
                    max_samples=1, display="none")
assert logs[0].status == "success", logs[0].status
'''


def write_inspect_log(work: Path, replies: Sequence[Reply], task: str = "rimo_n") -> Path:
    """A real inspect_ai ``.eval`` log (its ``match()`` scorer) of these replies."""
    python = tool_python("inspect")
    work.mkdir(parents=True, exist_ok=True)
    (work / "make_log.py").write_text(_INSPECT_SCRIPT, encoding="utf-8")
    spec = {"task": task, "log_dir": str(work / "logs"),
            "replies": [r.__dict__ for r in replies]}
    (work / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    subprocess.run([str(python), "make_log.py", "spec.json"], cwd=work, env=_clean_env(work),
                   check=True, capture_output=True, text=True)
    (log,) = (work / "logs").glob("*.eval")
    return log


def _lmeval_task(data: Path) -> dict[str, object]:
    """A RIMO-N task over the upstream rows; JSON is YAML to its loader (no quoting to get
    wrong). The prompt is the problem text verbatim, so the fake server can tell which."""
    return {"task": LMEVAL_TASK, "dataset_path": "json",
            "dataset_kwargs": {"data_files": {"test": str(data)}}, "test_split": "test",
            "output_type": "generate_until", "doc_to_text": "problem",
            "doc_to_target": "answer", "generation_kwargs": {"until": [], "max_gen_toks": 64},
            "metric_list": [{"metric": "exact_match"}]}


def write_lmeval_samples(work: Path, replies: Sequence[Reply]) -> Path:
    """A real lm-eval ``--log_samples`` file: these problems (as upstream rows) sent through
    ``local-chat-completions`` to the fake chat server, which answers each with its reply."""
    python = tool_python("lmeval")
    work.mkdir(parents=True, exist_ok=True)
    data = work / "rimo_n.jsonl"
    data.write_text("".join(json.dumps({"problem_id": r.problem_id, "problem": r.problem,
                                        "answer": r.gold}) + "\n" for r in replies),
                    encoding="utf-8")
    (work / "tasks").mkdir(exist_ok=True)
    (work / "tasks" / f"{LMEVAL_TASK}.yaml").write_text(json.dumps(_lmeval_task(data)),
                                                        encoding="utf-8")
    by_prompt = {r.problem.strip(): r.text for r in replies}
    server = ChatServer(responder=lambda body, prompt: by_prompt.get(prompt.strip())).start()
    try:
        model_args = ",".join([f"base_url={server.base_url}/chat/completions", "model=m",
                               "tokenizer_backend=None", "tokenized_requests=False",
                               "max_retries=1", "num_concurrent=1"])
        subprocess.run([str(python), "-m", "lm_eval", "--model", "local-chat-completions",
                        "--model_args", model_args, "--tasks", LMEVAL_TASK,
                        "--include_path", str(work / "tasks"), "--apply_chat_template",
                        "--batch_size", "1", "--output_path", str(work / "out"),
                        "--log_samples"], cwd=work, env=_clean_env(work), check=True,
                       capture_output=True, text=True)
    finally:
        server.stop()
    (samples,) = (work / "out").rglob(f"samples_{LMEVAL_TASK}_*.jsonl")
    return samples
