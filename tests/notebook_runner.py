"""Execute a notebook in a fresh kernel, as a student would, and collect what went wrong."""

from __future__ import annotations

from pathlib import Path

import nbformat

from gpucourse.course import run_notebook
from gpucourse.course.execution import CELL_TIMEOUT

# Appended to every executed notebook: kernels it defines but never launched were never
# compiled for the GPU, so the suite would not notice simulator-only code in them.
PTX_COVERAGE_CELL = (
    "from gpucourse.run import unchecked_kernels as _unchecked\n"
    "print('UNCHECKED_KERNELS', _unchecked(globals()))"
)


def execute(path: Path, cell_timeout: float = CELL_TIMEOUT):
    """Run ``path`` top to bottom in its folder; return the executed notebook (a stalled cell raises `CellStalled`)."""
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(PTX_COVERAGE_CELL))
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
