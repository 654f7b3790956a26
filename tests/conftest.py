"""Test-wide settings: every simulated kernel must also compile for a real GPU; shared fixtures."""

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


@pytest.fixture(scope="session")
def built_decks(tmp_path_factory) -> Path:
    """Every lecture executed and exported as a slide deck (what `make slides` does), built once."""
    from gpucourse.course.slides import build

    out_dir = tmp_path_factory.mktemp("slides")
    build(ROOT / "lectures", out_dir)
    return out_dir


def load_benchmark(name: str, module_name: str):
    """Import ``benchmarks/<name>.py`` as module ``module_name``; returns it and a function that unloads it."""
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module, lambda: sys.modules.pop(spec.name, None)
