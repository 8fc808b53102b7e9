"""The JSON Schemas of Every Eval Ever 0.3.0, from the package's own wheel, pinned by hash.

The package needs Python >= 3.12 and heavy dependencies, so rimo-eval does not depend on it:
``pip download`` fetches the wheel alone (no dependencies, for Python 3.12) and the two schemas
are read out of it. Done once per test session (``eee_schemas`` fixture in the test module).
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from rimo_eval.io.hashing import sha256_file

VERSION = "0.3.0"
WHEEL_SHA256 = "564b8bc624c1f822f749a769dc69dc058a736e83d920cbeb147c3a30d3152317"
SCHEMAS = {"eval": "every_eval_ever/schemas/eval.schema.json",
           "instance": "every_eval_ever/schemas/instance_level_eval.schema.json"}


def download_schemas(folder: Path) -> dict[str, dict[str, Any]]:
    """``{"eval": schema, "instance": schema}`` from the pinned wheel, downloaded into
    ``folder``; an AssertionError when the wheel's sha256 is not the pinned one."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--python-version",
                    "3.12", "--only-binary=:all:", f"every-eval-ever=={VERSION}", "-d",
                    str(folder), "-q"], check=True, capture_output=True, timeout=300)
    (wheel,) = folder.glob(f"every_eval_ever-{VERSION}-*.whl")
    found = sha256_file(wheel)
    assert found == WHEEL_SHA256, f"{wheel.name}: sha256 {found}, pinned {WHEEL_SHA256}"
    with zipfile.ZipFile(wheel) as archive:
        return {name: json.loads(archive.read(member)) for name, member in SCHEMAS.items()}


def errors(schema: dict[str, Any], record: Any) -> list[str]:
    """Every violation of ``schema`` by ``record``, each with its path (empty: valid)."""
    import jsonschema

    validator = jsonschema.Draft7Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(record)]


__all__ = ["SCHEMAS", "VERSION", "WHEEL_SHA256", "download_schemas", "errors"]
