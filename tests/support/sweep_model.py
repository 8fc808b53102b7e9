"""A "vLLM" for the sweep test: the fake chat server (tests/chat_server.py) on a given port,
answering as the model folder it is given says, run by each Slurm task as its model server:

    python -m tests.support.sweep_model --port 8000 --model-dir MODELS/m-mid

``MODEL_DIR/model.json``: ``answers`` (a JSON file, problem text -> gold answer, written by the
test from the items table), ``right`` (which of them this model gets right: ``all``, ``none`` or
``even``, the items whose text's sha256 is even: different models, different numbers) and
``hold`` (a path: while that file exists every chat request waits, so the test can kill the task
mid-run at a known point). Each chat request is logged to ``MODEL_DIR/requests.log``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from tests.chat_server import ChatServer


def solves(text: str, right: str) -> bool:
    if right == "all":
        return True
    if right == "even":
        return hashlib.sha256(text.encode()).digest()[-1] % 2 == 0
    return False


def responder(model_dir: Path) -> Any:
    spec = json.loads((model_dir / "model.json").read_text(encoding="utf-8"))
    answers: dict[str, str] = json.loads(Path(spec["answers"]).read_text(encoding="utf-8"))
    hold = Path(spec["hold"]) if spec.get("hold") else None
    log = model_dir / "requests.log"
    lock = threading.Lock()

    def reply(body: dict[str, Any], prompt: str) -> str | None:
        with lock, log.open("a", encoding="utf-8") as fh:
            fh.write(f"{time.time():.3f}\n")
        while hold is not None and hold.exists():
            time.sleep(0.2)
        for text, gold in answers.items():
            if text in prompt:
                return (f"The answer is \\boxed{{{gold}}}." if solves(text, spec["right"])
                        else "The answer is \\boxed{-1}.")
        return None  # RIMO-P: the server's own reply, wrong for every model

    return reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-dir", type=Path, required=True)
    args = parser.parse_args()
    ChatServer(responder=responder(args.model_dir)).start(port=args.port)
    print(f"serving {args.model_dir.name} on 127.0.0.1:{args.port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
