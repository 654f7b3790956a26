"""Test-wide settings: every simulated kernel must also compile for a real GPU."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("GPUCOURSE_PTX_CHECK", "require")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
