"""Import what a real-model test needs, or skip it; under CI (``CI`` set) fail instead, since CI
installs llama-cpp-python and the packaged GGUF and must run the real local model."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def need(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed, and CI must run the real local model")
        pytest.skip(f"{module} is not installed")
