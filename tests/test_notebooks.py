"""Every lecture runs top to bottom, quietly, with GPU-valid kernels.

(The solutions run whole in `test_nbgrader.py`'s round trips, which check that they write nothing on stderr,
and each exercise alone in `test_assignments_run_all.py`, which checks that its kernels are all launched.)
"""

import pytest

from conftest import ROOT
from notebook_runner import stderr_outputs, unchecked_kernels

LECTURES = sorted(ROOT.glob("lectures/*.ipynb"))


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_lecture_executes(path, executed_lecture):
    notebook = executed_lecture(path)
    assert stderr_outputs(notebook) == [], f"{path.name} wrote to stderr"
    assert unchecked_kernels(notebook) == "[]", (
        f"{path.name} defines kernels never launched, so never compiled for the GPU"
    )


def test_there_are_lectures_to_run():
    assert len(LECTURES) >= 10
