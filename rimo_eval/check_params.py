"""The check-params stage: the whole params file, validated as every stage validates it.

DVC runs a stage only when one of its declared inputs changed, and each stage declares only the
params it reads. A key no stage declares (``dvc exp run -S +predict.limt=3``, as DVC's own error
message suggests) would then change nothing: the experiment reported success, and every later
``rimo-eval`` command failed on the file. This stage depends on the whole file, so DVC runs it
on any change to it (and, as fetch depends on its stamp, before any other stage, whatever the
target), and the CLI's validation fails it.

The stamp is the same bytes for every valid file: after a change to a param that no other stage
reads, DVC reruns this stage alone and nothing after it.
"""

from __future__ import annotations

from pathlib import Path

from rimo_eval.artifacts.paths import PARAMS_CHECK_PATH
from rimo_eval.io.atomic import write_json
from rimo_eval.params.config import Params

STAMP = {"stage": "check-params", "valid": True}


def run(params: Params, stamp: Path = PARAMS_CHECK_PATH) -> None:
    # The CLI has already read and validated the file (rimo_eval/cli.py): reaching here means it
    # passed.
    write_json(stamp, STAMP)
    print(f"check-params: {params.path.as_posix()}: every key known, every value valid")
