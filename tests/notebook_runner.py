"""Execute a notebook in a fresh kernel, as a student would, and collect what went wrong."""

from __future__ import annotations

from pathlib import Path

import nbformat

from gpucourse.course import run_notebook
from gpucourse.course.execution import CELL_TIMEOUT

def ptx_coverage_cell(namespace: str = "globals()") -> str:
    """A cell that prints the kernels in ``namespace`` (an expression) never launched: appended to every executed
    notebook, since those were never compiled for the GPU and the suite would not notice simulator-only code in
    them."""
    return ("from gpucourse.run import unchecked_kernels as _unchecked\n"
            f"print('UNCHECKED_KERNELS', _unchecked({namespace}))")


def execute(path: Path, cell_timeout: float = CELL_TIMEOUT):
    """Run ``path`` top to bottom in its folder; return the executed notebook (a stalled cell raises `CellStalled`)."""
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(ptx_coverage_cell()))
    run_notebook(notebook, path.parent, cell_timeout)
    return notebook


def stderr_outputs(cells) -> list[str]:
    """What the code cells among ``cells`` (a notebook's, or a list) wrote to stderr."""
    return [
        out.get("text", "")
        for cell in getattr(cells, "cells", cells) if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream" and out.get("name") == "stderr"
    ]


def unchecked_kernels(notebook) -> str:
    text = "".join(out.get("text", "") for out in notebook.cells[-1].outputs)
    return text.split("UNCHECKED_KERNELS", 1)[1].strip()
