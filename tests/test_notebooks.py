"""Every lecture and solution notebook runs top to bottom, quietly, with GPU-valid kernels."""

import pytest

from conftest import ROOT
from notebook_runner import execute, stderr_outputs, unchecked_kernels

NOTEBOOKS = sorted(ROOT.glob("lectures/*.ipynb")) + sorted(ROOT.glob("solutions/*/*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_executes(path):
    notebook = execute(path)
    assert stderr_outputs(notebook) == [], f"{path.name} wrote to stderr"
    assert unchecked_kernels(notebook) == "[]", (
        f"{path.name} defines kernels never launched, so never compiled for the GPU"
    )


def test_there_are_notebooks_to_run():
    assert any("lectures" in str(p) for p in NOTEBOOKS)
    assert any("solutions" in str(p) for p in NOTEBOOKS)
