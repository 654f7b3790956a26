"""Whose failure a kernel's is: one that never started ran no student code (the grading machine failed); one
that died in a cell is the student's (the cells it did not reach score 0)."""

import sys

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from gpucourse.classroom import sandbox
from gpucourse.classroom.autograde import KernelDidNotStart, SafeExecute

KERNELSPEC = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}


def notebook():
    return new_notebook(cells=[new_code_cell("x = 1"), new_code_cell("import os\nos._exit(1)"), new_code_cell("x")],
                        metadata=KERNELSPEC)


def test_a_kernel_that_does_not_start_fails_the_grading_with_what_its_process_said(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "unavailable", lambda: None)
    monkeypatch.setattr(sandbox, "kernel_argv", lambda *args: [sys.executable, "-c", "raise SystemExit('no python')"])
    with pytest.raises(KernelDidNotStart, match=r"^no student code ran, the grading machine failed: RuntimeError: "
                       r"Kernel died before replying to kernel_info; the kernel's process said: no python$"):
        SafeExecute(course_root=str(tmp_path)).preprocess(notebook(), {"metadata": {"path": str(tmp_path)}})


def test_a_kernel_that_dies_in_a_cell_costs_the_student_the_cells_it_did_not_reach(tmp_path):
    ran, _ = SafeExecute(course_root=str(tmp_path), timeout=60).preprocess(
        notebook(), {"metadata": {"path": str(tmp_path)}})
    first, died, later = ran.cells
    assert first.execution_count == 1 and not first.outputs
    assert [o.ename for o in died.outputs] == ["KernelDied"]
    assert [(o.ename, o.evalue) for o in later.outputs] == [
        ("NotRun", "not run: the kernel died in an earlier cell (os._exit, a signal, or out of memory)")]
