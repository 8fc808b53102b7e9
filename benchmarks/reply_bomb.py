"""Peak RSS of one request against a gzip bomb (issue 42 §3): each transport (openai; the
anthropic and gemini SDKs', through ``chat/capped_http``) reads a reply only up to
``max_reply_bytes`` decoded (default 64 MiB).

A loopback server (``tests/support/hostile_replies.py``, in this process) answers every POST
with ``--decoded-mib`` MiB of zeros gzipped (the issue's 2 GiB: about 2 MiB on the wire). One
request goes through the real transport (``send``: probe, HTTP, retries off)
in a child process, whose peak RSS comes from ``wait4``; the same child against an honest
gzip reply of a few hundred bytes is the baseline. Before the cap, the 2 GiB bomb cost 4.39
GB of RSS for that one request (the issue's figure); ``--cap-mib`` above the bomb's size
shows the uncapped read (needs that much memory).

    .venv/bin/python benchmarks/reply_bomb.py                   # 2048 MiB bomb, default cap
    .venv/bin/python benchmarks/reply_bomb.py --decoded-mib 512 --cap-mib 1024  # uncapped
    .venv/bin/python benchmarks/reply_bomb.py --quick           # 128 MiB bomb
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timed import run_timed  # noqa: E402

from rimo_eval.params.chat import MAX_REPLY_BYTES  # noqa: E402
from tests.support.hostile_replies import Encoded, MiB, RawServer, gzip_bomb  # noqa: E402

# The child: one request through the backend's transport, its outcome on one line.
CHILD = """
import sys
from rimo_eval.chat.session import run_sync
from rimo_eval.chat.transport import TransportError

base_url, cap, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3]
common = dict(model="bench", api_key_env=None, max_retries=0, timeout_s=600,
              max_reply_bytes=cap)
if backend == "openai":
    from rimo_eval.chat.openai.transport import OpenAITransport
    from rimo_eval.params.chat import OpenAIParams
    transport = OpenAITransport(OpenAIParams(base_url=base_url + "/v1", **common),
                                "predict.openai")
elif backend == "anthropic":
    from rimo_eval.chat.anthropic.transport import AnthropicTransport
    from rimo_eval.params.chat import AnthropicParams
    transport = AnthropicTransport(AnthropicParams(base_url=base_url, **common))
else:
    from rimo_eval.chat.gemini.transport import GeminiTransport
    from rimo_eval.params.chat import GeminiParams
    transport = GeminiTransport(GeminiParams(base_url=base_url, **common))

async def one():
    try:
        await transport.probe()
        reply = await transport.send(transport.request([{"role": "user", "content": "hi"}]))
        return f"ok {len(reply.texts[0])} characters"
    except TransportError as exc:
        return f"failed {exc.kind or str(exc)[:70]}"
    finally:
        await transport.aclose()

print("outcome:", run_sync(one()))
"""

TEXT = "The answer is \\boxed{7}."
HONEST = {  # each backend's reply to the child's one request
    "openai": {"id": "x", "object": "chat.completion", "model": "bench",
               "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": TEXT}}],
               "usage": {"prompt_tokens": 1, "completion_tokens": 6, "total_tokens": 7}},
    "anthropic": {"id": "msg_x", "type": "message", "role": "assistant", "model": "bench",
                  "content": [{"type": "text", "text": TEXT}], "stop_reason": "end_turn",
                  "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 6}},
    "gemini": {"candidates": [{"content": {"role": "model", "parts": [{"text": TEXT}]},
                               "finishReason": "STOP", "index": 0}],
               "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 6,
                                 "totalTokenCount": 7}, "modelVersion": "bench"},
}


def one_request(backend: str, body: bytes, cap: int) -> tuple[str, float, float]:
    """(outcome, peak RSS MiB, wall s) of the child's one request against ``body`` (gzip)."""
    with RawServer(Encoded(body)) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
        done = run_timed([sys.executable, "-c", CHILD, server.base_url, str(cap), backend],
                         ROOT, env)
    if done.returncode != 0:
        sys.exit(f"the child exited {done.returncode}:\n{done.output[-3000:]}")
    outcome = next(line.split(": ", 1)[1] for line in done.output.splitlines()
                   if line.startswith("outcome: "))
    return outcome, done.rss_mib, done.wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decoded-mib", type=int, default=2048)
    parser.add_argument("--cap-mib", type=int, default=None,
                        help=f"max_reply_bytes in MiB (default: {MAX_REPLY_BYTES // MiB})")
    parser.add_argument("--quick", action="store_true", help="a 128 MiB bomb")
    parser.add_argument("--backend", choices=[*HONEST, "all"], default="all",
                        help="whose transport sends the request (default: each in turn)")
    args = parser.parse_args()
    decoded = 128 if args.quick else args.decoded_mib
    cap = MAX_REPLY_BYTES if args.cap_mib is None else args.cap_mib * MiB
    started = time.perf_counter()
    bomb = gzip_bomb(decoded * MiB)
    print(f"bomb: {decoded} MiB of zeros, {len(bomb) / MiB:.2f} MiB gzipped "
          f"(built in {time.perf_counter() - started:.1f} s); cap {cap // MiB} MiB")
    print("| backend | reply | outcome | peak RSS of the request's process | wall |")
    print("| --- | --- | --- | --- | --- |")
    for backend in HONEST if args.backend == "all" else [args.backend]:
        honest = gzip.compress(json.dumps(HONEST[backend]).encode())
        for name, body in ((f"honest, {len(honest)} B gzipped", honest),
                           (f"bomb, {decoded} MiB decoded", bomb)):
            outcome, rss, wall = one_request(backend, body, cap)
            print(f"| {backend} | {name} | {outcome} | {rss:.0f} MiB | {wall:.1f} s |")

if __name__ == "__main__":
    main()
