"""Test-wide settings: every simulated kernel must also compile for a real GPU."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("GPUCOURSE_PTX_CHECK", "require")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def load_benchmark(name: str, module_name: str):
    """Import ``benchmarks/<name>.py`` as module ``module_name``; returns it and a function that unloads it."""
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module, lambda: sys.modules.pop(spec.name, None)
